package conntrack

import (
	"reflect"
	"time"
)

// Timeouts holds the per-protocol timeouts, named after the
// net.netfilter.nf_conntrack_*_timeout* sysctls. [DefaultTimeouts] returns
// the kernel defaults.
type Timeouts struct {
	TCPSynSent     time.Duration // nf_conntrack_tcp_timeout_syn_sent (120 s)
	TCPSynRecv     time.Duration // nf_conntrack_tcp_timeout_syn_recv (60 s)
	TCPEstablished time.Duration // nf_conntrack_tcp_timeout_established (432000 s)
	TCPFinWait     time.Duration // nf_conntrack_tcp_timeout_fin_wait (120 s)
	TCPCloseWait   time.Duration // nf_conntrack_tcp_timeout_close_wait (60 s)
	TCPLastAck     time.Duration // nf_conntrack_tcp_timeout_last_ack (30 s)
	TCPTimeWait    time.Duration // nf_conntrack_tcp_timeout_time_wait (120 s)
	TCPClose       time.Duration // nf_conntrack_tcp_timeout_close (10 s)
	TCPSynSent2    time.Duration // simultaneous open (120 s)
	// TCPUnacknowledged (nf_conntrack_tcp_timeout_unacknowledged, 300 s)
	// caps the timeout while data is unacknowledged in either direction,
	// and of a connection picked up mid-stream until it sees a reply.
	TCPUnacknowledged time.Duration
	// TCPMaxRetrans (nf_conntrack_tcp_timeout_max_retrans, 300 s) caps the
	// timeout after Config.TCPMaxRetrans identical ACKs in a row, or while
	// the last window advertised by a pure ACK is zero. Zero selects the
	// default even when other fields are set.
	TCPMaxRetrans time.Duration
	UDP           time.Duration // nf_conntrack_udp_timeout (30 s)
	UDPStream     time.Duration // nf_conntrack_udp_timeout_stream (120 s)
	ICMP          time.Duration // nf_conntrack_icmp_timeout (30 s)
	ICMPv6        time.Duration // nf_conntrack_icmpv6_timeout (30 s)
	Generic       time.Duration // nf_conntrack_generic_timeout (600 s)
}

// DefaultTimeouts returns the kernel's default timeouts.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		TCPSynSent:        120 * time.Second,
		TCPSynRecv:        60 * time.Second,
		TCPEstablished:    432000 * time.Second,
		TCPFinWait:        120 * time.Second,
		TCPCloseWait:      60 * time.Second,
		TCPLastAck:        30 * time.Second,
		TCPTimeWait:       120 * time.Second,
		TCPClose:          10 * time.Second,
		TCPSynSent2:       120 * time.Second,
		TCPUnacknowledged: 300 * time.Second,
		TCPMaxRetrans:     300 * time.Second,
		UDP:               30 * time.Second,
		UDPStream:         120 * time.Second,
		ICMP:              30 * time.Second,
		ICMPv6:            30 * time.Second,
		Generic:           600 * time.Second,
	}
}

// WithDefaults returns t with every zero field set to the kernel default,
// so that a caller can change one sysctl and keep the others. It walks the
// fields by reflection so that a timeout added later is covered too.
func (t Timeouts) WithDefaults() Timeouts {
	d := DefaultTimeouts()
	tv, dv := reflect.ValueOf(&t).Elem(), reflect.ValueOf(d)
	for i := range tv.NumField() {
		if f := tv.Field(i); f.CanSet() && f.IsZero() {
			f.Set(dv.Field(i))
		}
	}
	return t
}

// tcp returns the timeout of TCP state s.
func (t *Timeouts) tcp(s TCPState) time.Duration {
	switch s {
	case TCPSynSent:
		return t.TCPSynSent
	case TCPSynRecv:
		return t.TCPSynRecv
	case TCPEstablished:
		return t.TCPEstablished
	case TCPFinWait:
		return t.TCPFinWait
	case TCPCloseWait:
		return t.TCPCloseWait
	case TCPLastAck:
		return t.TCPLastAck
	case TCPTimeWait:
		return t.TCPTimeWait
	case TCPClose:
		return t.TCPClose
	case TCPSynSent2:
		return t.TCPSynSent2
	}
	return t.TCPClose
}

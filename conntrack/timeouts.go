package conntrack

import "time"

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
	// TCPUnacknowledged (300 s) caps the timeout of a connection picked up
	// mid-stream until it sees a reply. The kernel also applies it (and
	// max_retrans, 300 s) when data stays unacknowledged; the model does
	// not track sequence numbers, so that use is not modelled.
	TCPUnacknowledged time.Duration
	UDP               time.Duration // nf_conntrack_udp_timeout (30 s)
	UDPStream         time.Duration // nf_conntrack_udp_timeout_stream (120 s)
	ICMP              time.Duration // nf_conntrack_icmp_timeout (30 s)
	ICMPv6            time.Duration // nf_conntrack_icmpv6_timeout (30 s)
	Generic           time.Duration // nf_conntrack_generic_timeout (600 s)
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
		UDP:               30 * time.Second,
		UDPStream:         120 * time.Second,
		ICMP:              30 * time.Second,
		ICMPv6:            30 * time.Second,
		Generic:           600 * time.Second,
	}
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

package netfilter

import "github.com/packetwalk/packetwalk/inet"

// FrameHost runs frames, rather than Packets, through a Host: it decodes
// each frame, walks it, and writes what leaves as frames again. Its
// buffers are reused, so a FrameResult's frames are valid until the next
// call. A FrameHost is not safe for concurrent use.
type FrameHost struct {
	Host *Host
	// Raw says frames are raw IP packets rather than Ethernet frames.
	Raw bool

	dec     *Decoder
	out     []byte
	emitted [][]byte

	// Reassembly (defrag.go): the queues, the last reassembled frame,
	// the fragments it was made of (offset, length) and what cutting it
	// again needs.
	queues    map[fragKey]*fragQueue
	whole     []byte
	pieces    [][2]int
	unfragLen int
	fragLink  int
	fragID    uint32
	fragV6    bool
	fragBufs  [][]byte
	frags     [][]byte
}

// FrameResult is what happened to one frame.
type FrameResult struct {
	Result
	// Frame is the frame as it leaves on Result.Packet.Out (forwarded or
	// sent), nil when it does not leave.
	Frame []byte
	// Emitted are the frames of Result.Emitted, in order; each leaves on
	// its packet's Out (the interface the offending frame came in on).
	Emitted [][]byte
	// Fragments, when not nil, are the frames that actually leave: the
	// packet was reassembled from fragments (conntrack in use) and leaves
	// cut along them again. Frame then holds it whole, as the hooks saw
	// it.
	Fragments [][]byte
}

// NewFrameHost returns a FrameHost over h.
func NewFrameHost(h *Host) *FrameHost {
	return &FrameHost{Host: h, dec: NewDecoder()}
}

// ReceiveFrame decodes a frame that arrived on iface and walks it like
// Host.Receive. A frame that cannot be decoded returns a *FrameError and
// does not reach the host.
//
// When a loaded rule needs conntrack, a fragment is queued instead, as
// the kernel's defragmentation does before raw PREROUTING: the result's
// Disposition is Held (or Dropped, with the Reason, when it made its
// queue inconsistent), and the fragment that completes its packet walks
// the whole packet. Queues expire silently after 30 seconds of the
// host's clock.
//
// An iface the host does not have returns a *PacketError wrapping
// ErrUnknownInterface, before the frame is decoded.
func (f *FrameHost) ReceiveFrame(iface string, frame []byte) (FrameResult, error) {
	if !f.Host.hasIface(iface) {
		return FrameResult{}, f.Host.unknownIface(iface)
	}
	return f.walk(frame, func(p Packet) Result { return f.Host.Receive(iface, p) }, false, iface)
}

// SendFrame decodes a frame a local process sends and walks it like
// Host.Send; fragments are reassembled before OUTPUT as ReceiveFrame
// describes.
func (f *FrameHost) SendFrame(frame []byte) (FrameResult, error) {
	return f.walk(frame, f.Host.Send, true, "")
}

func (f *FrameHost) walk(frame []byte, run func(Packet) Result, out bool, iface string) (FrameResult, error) {
	p, err := f.decode(frame)
	if err != nil {
		return FrameResult{}, err
	}
	f.fillRaw(&p)
	if !f.Host.defragging(p.Family) {
		return f.finish(frame, run(p))
	}
	fi, ok := f.dec.fragment(out)
	if !ok {
		return f.finish(frame, run(p))
	}
	done, reason := f.defrag(frame, fi)
	if !done {
		p.In = iface
		d := Held
		if reason != reasonHeld {
			d = Dropped
		}
		return FrameResult{Result: Result{Verdict: VerdictDrop, Disposition: d, Reason: reason, Packet: p}}, nil
	}
	whole := f.whole
	if p, err = f.decode(whole); err != nil {
		return FrameResult{}, err
	}
	f.fillRaw(&p)
	fr, err := f.finish(whole, run(p))
	if err != nil || fr.Frame == nil {
		return fr, err
	}
	f.frags = f.refragment(f.frags[:0], fr.Frame)
	fr.Fragments = f.frags
	return fr, nil
}

// fillRaw gives the decoded packet its bytes when a loaded rule reads
// them; the copy is made only then.
func (f *FrameHost) fillRaw(p *Packet) {
	if pr := f.Host.progs[famIdx(p.Family)]; pr != nil && pr.readsBytes {
		p.Raw = string(f.dec.ipBytes())
	}
}

func (f *FrameHost) decode(frame []byte) (Packet, error) {
	if f.Raw {
		return f.dec.DecodeIP(frame)
	}
	return f.dec.Decode(frame)
}

func (f *FrameHost) finish(frame []byte, res Result) (FrameResult, error) {
	fr := FrameResult{Result: res}
	if res.Err != nil {
		return fr, res.Err
	}
	var err error
	if res.Disposition == Forwarded || res.Disposition == Sent {
		if f.Raw {
			f.out, err = f.dec.AppendIP(f.out[:0], frame, res.Packet)
		} else {
			f.out, err = f.dec.AppendFrame(f.out[:0], frame, res.Packet)
		}
		if err != nil {
			return fr, err
		}
		fr.Frame = f.out
	}
	for i, e := range res.Emitted {
		if i == len(f.emitted) {
			f.emitted = append(f.emitted, nil)
		}
		if f.Raw {
			f.emitted[i], err = f.dec.AppendReplyIP(f.emitted[i][:0], frame, res.Packet, e)
		} else {
			f.emitted[i], err = f.dec.AppendReplyFrame(f.emitted[i][:0], frame, res.Packet, e)
		}
		if err != nil {
			return fr, err
		}
		if e.Proto == inet.TCP {
			// The reset's numbers as written into the frame, from the
			// bytes of the segment it answers.
			res.Emitted[i].Seq, res.Emitted[i].Ack = f.dec.resetSeq, f.dec.resetAck
			res.Emitted[i].TCPHeaderLen = 20
		}
	}
	if len(res.Emitted) > 0 {
		fr.Emitted = f.emitted[:len(res.Emitted)]
	}
	return fr, nil
}

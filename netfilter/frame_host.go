package netfilter

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
}

// NewFrameHost returns a FrameHost over h.
func NewFrameHost(h *Host) *FrameHost {
	return &FrameHost{Host: h, dec: NewDecoder()}
}

// ReceiveFrame decodes a frame that arrived on iface and walks it like
// Host.Receive. A frame that cannot be decoded returns a *FrameError and
// does not reach the host.
func (f *FrameHost) ReceiveFrame(iface string, frame []byte) (FrameResult, error) {
	p, err := f.decode(frame)
	if err != nil {
		return FrameResult{}, err
	}
	return f.finish(frame, f.Host.Receive(iface, p))
}

// SendFrame decodes a frame a local process sends and walks it like
// Host.Send.
func (f *FrameHost) SendFrame(frame []byte) (FrameResult, error) {
	p, err := f.decode(frame)
	if err != nil {
		return FrameResult{}, err
	}
	return f.finish(frame, f.Host.Send(p))
}

func (f *FrameHost) decode(frame []byte) (Packet, error) {
	if f.Raw {
		return f.dec.DecodeIP(frame)
	}
	return f.dec.Decode(frame)
}

func (f *FrameHost) finish(frame []byte, res Result) (FrameResult, error) {
	fr := FrameResult{Result: res}
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
	}
	if len(res.Emitted) > 0 {
		fr.Emitted = f.emitted[:len(res.Emitted)]
	}
	return fr, nil
}

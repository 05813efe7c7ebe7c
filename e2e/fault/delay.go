package fault

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Netfilter queue (nfnetlink_queue) messages, from linux/netfilter/
// nfnetlink_queue.h: the kernel hands each queued packet to us and holds
// it until we give a verdict. Delaying the verdict delays the packet: this
// kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set), so tc cannot
// add delay here, and this can on any kernel with NFQUEUE.
const (
	nfnlSubsysQueue   = 3
	nfqnlMsgPacket    = 0
	nfqnlMsgVerdict   = 1
	nfqnlMsgConfig    = 2
	nfqaPacketHdr     = 1
	nfqaVerdictHdr    = 2
	nfqaCfgCmd        = 1
	nfqaCfgParams     = 2
	nfqaCfgQueueMax   = 3
	nfqnlCfgCmdBind   = 1
	nfqnlCopyMeta     = 1
	nfAccept          = 1
	nfnlMsgHeaderSize = 4 // struct nfgenmsg
	queueMaxLen       = 16384
)

// Delay delays every packet leaving the namespace (loopback aside) by
// d: an iptables NFQUEUE rule hands them to a queue that this process
// reads in the namespace and releases each d after it arrived. It is the
// netem-less way to a slow link; with --queue-bypass the packets flow
// undelayed if this process dies. queue is a queue number free in that
// namespace (one per concurrent Delay there).
func (in *Injector) Delay(netns string, queue uint16, d time.Duration) (*Fault, error) {
	if d <= 0 {
		return nil, fmt.Errorf("fault: delay %v: want a positive duration", d)
	}
	q, err := openQueue(netns, queue)
	if err != nil {
		return nil, fmt.Errorf("fault: %s delay on %s: %w", d, netns, err)
	}
	go q.serve(d)
	// Healing removes the rule first, so that packets stop coming, then
	// the queue.
	return in.filter(fmt.Sprintf("%s delay on %s", d, netns), netns, [][]string{
		{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(queue)), "--queue-bypass"}}, q.close)
}

type nfqueue struct {
	fd    int
	queue uint16
	once  sync.Once
	done  chan struct{}
}

// openQueue binds a netlink socket made inside netns to queue.
func openQueue(netns string, queue uint16) (*nfqueue, error) {
	fd, err := socketIn(netns)
	if err != nil {
		return nil, err
	}
	q := &nfqueue{fd: fd, queue: queue, done: make(chan struct{})}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	// A blocked receive does not end when another thread closes the
	// socket: serve wakes up this often to see whether it should stop.
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, pf (unused)
	params := make([]byte, 5)               // copy range (0), copy mode
	params[4] = nfqnlCopyMeta
	maxLen := binary.BigEndian.AppendUint32(nil, queueMaxLen)
	msg := q.message(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK,
		attr(nfqaCfgCmd, cmd), attr(nfqaCfgParams, params), attr(nfqaCfgQueueMax, maxLen))
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := readAck(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding netfilter queue %d: %w", queue, err)
	}
	return q, nil
}

// socketIn makes a netfilter netlink socket in the namespace at path: a
// socket belongs to the namespace of the thread that made it.
func socketIn(netns string) (int, error) {
	type res struct {
		fd  int
		err error
	}
	// A goroutine of its own, so that the thread discarded when the way
	// back fails is never the caller's.
	ch := make(chan res, 1)
	go func() {
		fd, err := inNetns(netns, func() (int, error) {
			return unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		})
		ch <- res{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// inNetns runs f on this goroutine's thread inside the network namespace
// at path, then returns the thread to its own namespace. The thread must
// live on: a child started with Pdeathsig (the node's control plane) dies
// when the thread that forked it exits, and a goroutine that ends locked
// to a thread ends the thread. Only when the way back fails is the thread
// left locked, to be discarded, since it is in the wrong namespace.
func inNetns(path string, f func() (int, error)) (int, error) {
	runtime.LockOSThread()
	own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer own.Close()
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("entering %s: %w", path, err)
	}
	fd, err := f()
	if back := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); back != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		// Left locked: the thread, stuck in path's namespace, ends with
		// the goroutine instead of serving others.
		return -1, fmt.Errorf("returning from %s: %w", path, back)
	}
	runtime.UnlockOSThread()
	return fd, err
}

func readAck(fd int) error {
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return unix.Errno(-errno)
			}
		}
	}
	return nil
}

// serve releases each packet d after it arrived, in arrival order, until
// close; then it closes the socket, which drops what is still held (TCP
// sends it again).
func (q *nfqueue) serve(d time.Duration) {
	type held struct {
		id  uint32
		due time.Time
	}
	pending := make(chan held, queueMaxLen)
	released := make(chan struct{})
	go func() {
		defer close(released)
		for p := range pending {
			select {
			case <-q.done:
				continue
			case <-time.After(time.Until(p.due)):
			}
			msg := q.message(nfqnlMsgVerdict, unix.NLM_F_REQUEST,
				attr(nfqaVerdictHdr, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, nfAccept), p.id)))
			_ = unix.Sendto(q.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		}
	}()
	defer func() {
		close(pending)
		<-released
		unix.Close(q.fd)
	}()
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-q.done:
			return
		default:
		}
		n, _, err := unix.Recvfrom(q.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EINTR) {
			continue // a timeout, or packets the kernel dropped: they were not queued
		}
		if err != nil {
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(m.Data) < nfnlMsgHeaderSize {
				continue
			}
			if id, ok := packetID(m.Data[nfnlMsgHeaderSize:]); ok {
				pending <- held{id, time.Now().Add(d)}
			}
		}
	}
}

// packetID finds NFQA_PACKET_HDR among the attributes and returns its id.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff // without the nested/byte-order flags
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:8]), true
		}
		attrs = attrs[min(len(attrs), (l+3)&^3):]
	}
	return 0, false
}

// close stops serve, which closes the socket.
func (q *nfqueue) close() { q.once.Do(func() { close(q.done) }) }

// message is a netfilter queue netlink message for q with attributes.
func (q *nfqueue) message(typ uint16, flags uint16, attrs ...[]byte) []byte {
	body := []byte{unix.AF_UNSPEC, 0 /* version */, byte(q.queue >> 8), byte(q.queue)}
	for _, a := range attrs {
		body = append(body, a...)
	}
	h := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(h[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(h[4:], nfnlSubsysQueue<<8|typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	return append(h, body...)
}

// attr is one netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	a := make([]byte, 4, 4+len(data)+3)
	binary.NativeEndian.PutUint16(a[0:], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(a[2:], typ)
	a = append(a, data...)
	for len(a)%4 != 0 {
		a = append(a, 0)
	}
	return a
}

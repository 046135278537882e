package kerneltest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// NamePrefix starts the name of every namespace this package creates, so that
// they are recognisable (and never collide with namespaces of other tools).
const NamePrefix = "pw-"

// markerDir records, per namespace created here, the creating process. It
// lets [CleanupLeftovers] delete only namespaces whose creator is gone, never
// those of a concurrent run.
const markerDir = "/run/packetwalk-kerneltest"

// netnsDir is where iproute2 keeps named namespaces.
const netnsDir = "/var/run/netns"

// ErrBadName is returned when a namespace prefix does not start with
// [NamePrefix] or holds characters other than [a-z0-9-].
var ErrBadName = errors.New("kerneltest: bad namespace name")

// CommandError reports a tool that failed inside a namespace. Stderr holds
// the tool's diagnostics verbatim, e.g.
// "iptables-restore v1.8.9 (nf_tables): Chain 'X' does not exist\nError occurred at line: 7\n".
type CommandError struct {
	NS       string   // namespace name
	Args     []string // command and arguments, without "ip netns exec NS"
	Stdout   string
	Stderr   string
	ExitCode int   // -1 when the command did not run or was killed
	Err      error // underlying error from os/exec
}

// Error gives the command, its exit status and its stderr.
func (e *CommandError) Error() string {
	return fmt.Sprintf("kerneltest: %s in netns %s: exit %d: %s", strings.Join(e.Args, " "), e.NS, e.ExitCode, strings.TrimSpace(e.Stderr))
}

// Unwrap returns the os/exec error.
func (e *CommandError) Unwrap() error { return e.Err }

// NS is a network namespace created by this package.
type NS struct {
	name string
}

// Name returns the namespace name as shown by `ip netns list`.
func (n *NS) Name() string { return n.name }

// NewNS creates a namespace named prefix plus a unique suffix and deletes it in
// t.Cleanup, also when the test fails. prefix must start with "pw-".
func NewNS(t testing.TB, prefix string) *NS {
	t.Helper()
	ns, err := CreateNS(prefix)
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("delete namespace: %v", err)
		}
	})
	return ns
}

// CreateNS creates a namespace named prefix plus a unique suffix, for callers
// without a testing.TB (e.g. fixture recorders). The caller must Close it.
func CreateNS(prefix string) (*NS, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("kerneltest: namespace suffix: %w", err)
	}
	name := fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), hex.EncodeToString(suffix[:]))
	if err := writeMarker(name); err != nil {
		return nil, err
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		_ = os.Remove(filepath.Join(markerDir, name))
		return nil, fmt.Errorf("kerneltest: ip netns add %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	ns := &NS{name: name}
	// Loopback up: local tools (and the kernel's own replies to local
	// addresses) expect it, as in any real host.
	if _, _, err := ns.Exec("", "ip", "link", "set", "lo", "up"); err != nil {
		_ = ns.Close()
		return nil, err
	}
	return ns, nil
}

func checkPrefix(prefix string) error {
	if !strings.HasPrefix(prefix, NamePrefix) {
		return fmt.Errorf("%w: %q must start with %q", ErrBadName, prefix, NamePrefix)
	}
	for i, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("%w: %q has %q at byte %d, want [a-z0-9-]", ErrBadName, prefix, r, i)
		}
	}
	if len(prefix) > 40 {
		return fmt.Errorf("%w: %q is longer than 40 bytes", ErrBadName, prefix)
	}
	return nil
}

// Close deletes the namespace and its ownership marker. Deleting a
// namespace also destroys its veth ends, which removes their peers.
func (n *NS) Close() error {
	out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput()
	_ = os.Remove(filepath.Join(markerDir, n.name))
	if err != nil {
		return fmt.Errorf("kerneltest: ip netns del %s: %v: %s", n.name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Exec runs args inside the namespace (ip netns exec), feeding stdin, and
// returns stdout and stderr. A non-zero exit is a *CommandError.
func (n *NS) Exec(stdin string, args ...string) (stdout, stderr string, err error) {
	if len(args) == 0 {
		return "", "", fmt.Errorf("kerneltest: Exec in %s: no command", n.name)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.name}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	runErr := cmd.Run()
	stdout, stderr = o.String(), e.String()
	if runErr != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			code = ee.ExitCode()
		}
		return stdout, stderr, &CommandError{NS: n.name, Args: args, Stdout: stdout, Stderr: stderr, ExitCode: code, Err: runErr}
	}
	return stdout, stderr, nil
}

// Restore runs iptables-restore with args, feeding text. On failure the
// *CommandError carries the tool's stderr verbatim.
func (n *NS) Restore(text string, args ...string) error {
	_, _, err := n.Exec(text, append([]string{"iptables-restore"}, args...)...)
	return err
}

// Restore6 is [NS.Restore] for ip6tables-restore.
func (n *NS) Restore6(text string, args ...string) error {
	_, _, err := n.Exec(text, append([]string{"ip6tables-restore"}, args...)...)
	return err
}

// Save runs iptables-save with args and drops the "# Generated by" and
// "# Completed on" lines, which carry a date.
func (n *NS) Save(args ...string) (string, error) {
	out, err := n.SaveRaw(args...)
	return StripSaveComments(out), err
}

// SaveRaw runs iptables-save with args and returns its output unchanged.
func (n *NS) SaveRaw(args ...string) (string, error) {
	out, _, err := n.Exec("", append([]string{"iptables-save"}, args...)...)
	return out, err
}

// Save6 is [NS.Save] for ip6tables-save.
func (n *NS) Save6(args ...string) (string, error) {
	out, _, err := n.Exec("", append([]string{"ip6tables-save"}, args...)...)
	return StripSaveComments(out), err
}

// IPTables runs iptables with args and returns its stdout.
func (n *NS) IPTables(args ...string) (string, error) {
	out, _, err := n.Exec("", append([]string{"iptables"}, args...)...)
	return out, err
}

// IP6Tables runs ip6tables with args and returns its stdout.
func (n *NS) IP6Tables(args ...string) (string, error) {
	out, _, err := n.Exec("", append([]string{"ip6tables"}, args...)...)
	return out, err
}

// IPSet runs ipset with args and returns its stdout.
func (n *NS) IPSet(args ...string) (string, error) {
	out, _, err := n.Exec("", append([]string{"ipset"}, args...)...)
	return out, err
}

// IPSetRestore feeds text (ipset save format: "create ..." / "add ..." lines)
// to `ipset restore`.
func (n *NS) IPSetRestore(text string) error {
	_, _, err := n.Exec(text, "ipset", "restore")
	return err
}

// Sysctl sets key (dotted, e.g. "net.ipv4.ip_forward") to value inside the
// namespace.
func (n *NS) Sysctl(key, value string) error {
	_, _, err := n.Exec("", "sysctl", "-q", "-w", key+"="+value)
	return err
}

// StripSaveComments removes the "# Generated by ..." and "# Completed on ..."
// lines from iptables-save output and keeps everything else byte for byte.
func StripSaveComments(save string) string {
	var b strings.Builder
	b.Grow(len(save))
	for line := range strings.Lines(save) {
		if strings.HasPrefix(line, "# Generated by ") || strings.HasPrefix(line, "# Completed on ") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// writeMarker records that this process owns namespace name.
func writeMarker(name string) error {
	if err := os.MkdirAll(markerDir, 0o755); err != nil {
		return fmt.Errorf("kerneltest: marker dir: %w", err)
	}
	start, err := procStartTime(os.Getpid())
	if err != nil {
		return err
	}
	data := fmt.Sprintf("%d %s\n", os.Getpid(), start)
	if err := os.WriteFile(filepath.Join(markerDir, name), []byte(data), 0o644); err != nil {
		return fmt.Errorf("kerneltest: marker: %w", err)
	}
	return nil
}

// procStartTime returns field 22 of /proc/PID/stat (start time in clock
// ticks), which together with the pid identifies a process despite pid reuse.
func procStartTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; fields resume after ")".
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("kerneltest: /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3, so field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("kerneltest: /proc/%d/stat: %d fields after comm, want >= 20", pid, len(f))
	}
	return f[19], nil
}

// CleanupLeftovers deletes "pw-*" namespaces left behind by crashed runs: only
// those with an ownership marker written by this package whose creating
// process no longer exists. It returns the names it deleted.
func CleanupLeftovers() ([]string, error) {
	entries, err := os.ReadDir(markerDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, NamePrefix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(markerDir, name))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) != 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		if start, err := procStartTime(pid); err == nil && start == f[1] {
			continue // owner still running
		}
		if _, err := os.Stat(filepath.Join(netnsDir, name)); err == nil {
			if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", name, err, strings.TrimSpace(string(out))))
				continue
			}
			deleted = append(deleted, name)
		}
		_ = os.Remove(filepath.Join(markerDir, name))
	}
	return deleted, errors.Join(errs...)
}

package ipset

import (
	"os"
	"testing"
)

// FuzzRestore: no panics, and accepted input round-trips through save.
func FuzzRestore(f *testing.F) {
	if b, err := os.ReadFile("testdata/scenario.restore"); err == nil {
		f.Add(string(b))
	}
	f.Add("create S hash:net\nadd S 10.0.0.0/8\nadd S 10.1.0.0/16 nomatch\n")
	f.Add("create P hash:ip,port timeout 10\nadd P 1.2.3.4,tcp:80-82 timeout 0\n")
	f.Add("create L list:set\ncreate A bitmap:port range 1-9\nadd L A\nadd A 3\nswap L A\n")
	f.Add("create I hash:ip family inet6 comment\nadd I [::1] comment \"x y\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 4096 {
			return
		}
		r, _ := newTestRegistry()
		if err := r.Restore([]byte(in), RestoreOptions{Exist: true}); err != nil {
			return
		}
		// Large expansions are legal but slow to print repeatedly.
		total := 0
		for _, s := range r.sets() {
			total += len(s.order) + s.rec.live
		}
		if total > 5000 {
			return
		}
		a, err := r.AppendSave(nil)
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := newTestRegistry()
		if err := r2.Restore(a, RestoreOptions{}); err != nil {
			t.Fatalf("save output does not restore: %v\n%s", err, a)
		}
		b, err := r2.AppendSave(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Fatalf("round trip differs:\n%s\n---\n%s", a, b)
		}
	})
}

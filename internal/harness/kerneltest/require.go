package kerneltest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// EnvVar is the environment variable that enables kernel-backed tests when set
// to "1".
const EnvVar = "PACKETWALK_KERNEL"

// RequiredTools lists the programs kernel-backed tests need on $PATH.
var RequiredTools = []string{"ip", "iptables", "iptables-restore", "iptables-save", "ip6tables", "ip6tables-restore", "ip6tables-save", "ipset", "conntrack", "nfacct", "sysctl"}

// Require skips t unless PACKETWALK_KERNEL=1. When it is 1, Require fails t if
// the process is not root or one of [RequiredTools] is missing, naming what
// is missing: CI sets the variable and then kernel tests must really run.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvVar) != "1" {
		t.Skipf("kernel-backed test: set %s=1 (as root, with %s installed) to run it", EnvVar, strings.Join(RequiredTools, ", "))
	}
	if missing := missingPrereqs(); len(missing) > 0 {
		t.Fatalf("%s=1 but kernel-backed test cannot run: missing %s", EnvVar, strings.Join(missing, ", "))
	}
}

// missingPrereqs names what is missing to run kernel tests: "root" and tool
// names.
func missingPrereqs() []string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (euid is not 0)")
	}
	for _, tool := range RequiredTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, "tool "+tool)
		}
	}
	return missing
}

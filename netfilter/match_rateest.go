package netfilter

import "fmt"

// The rateest match compares the rates measured by the RATEEST target's
// named estimators. The RATEEST target is not modelled, and without it no
// estimator exists, so the kernel would refuse every rateest rule
// (RULE_APPEND: No such file or directory): packetwalk refuses the match
// by name when the rule is read.
func init() {
	refusedMatches["rateest"] = "the rateest match reads the RATEEST target's estimators, which packetwalk does not model"
}

// refusedMatches are match extensions of iptables that packetwalk knows
// but refuses, with the reason.
var refusedMatches = map[string]string{}

func refusedMatch(name string) error {
	if why, ok := refusedMatches[name]; ok {
		return fmt.Errorf("%w: -m %s: %s", ErrUnsupported, name, why)
	}
	return nil
}

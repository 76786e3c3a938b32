package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// parseDuration parses a Go duration ("90m", "36h", "1h30m"), also accepting whole days
// ("90d", "-1d"): the one duration syntax of every CLI flag and value.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > 100*365 || n < -100*365 {
			return 0, fmt.Errorf("bad duration %q: give whole days such as 7d, or hours, minutes, seconds such as 36h or 90m", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// durationFlag is a time.Duration flag read by parseDuration, so it takes days too.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string { return f.d.String() }
func (f durationFlag) Type() string   { return "duration" }
func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// durationVar defines a duration flag like pflag's DurationVar that also accepts whole days
// ("7d"): every duration flag of the CLI is one.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var(durationFlag{p}, name, usage)
}

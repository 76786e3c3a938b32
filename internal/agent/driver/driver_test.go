package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/cubefleet/cubefleet"
)

func TestSpecValidate(t *testing.T) {
	ok := Spec{ID: "sbx_01JQ8Z", Argv: []string{"echo", "hi"}, Env: []string{"A=1", "EMPTY=", "_X2=a=b"}, WorkDir: "a/b"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec refused: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		path   string
	}{
		{"empty id", func(s *Spec) { s.ID = "" }, "id"},
		{"id with a slash", func(s *Spec) { s.ID = "a/b" }, "id"},
		{"id of dots", func(s *Spec) { s.ID = ".." }, "id"},
		{"id too long", func(s *Spec) { s.ID = strings.Repeat("a", 129) }, "id"},
		{"no argv", func(s *Spec) { s.Argv = nil }, "argv"},
		{"empty program", func(s *Spec) { s.Argv = []string{""} }, "argv"},
		{"NUL in argv", func(s *Spec) { s.Argv = []string{"echo", "a\x00b"} }, "argv[1]"},
		{"env without =", func(s *Spec) { s.Env = []string{"A=1", "TOKEN"} }, "env[1]"},
		{"env name with a dash", func(s *Spec) { s.Env = []string{"MY-VAR=1"} }, "env[0]"},
		{"env name starting with a digit", func(s *Spec) { s.Env = []string{"1A=1"} }, "env[0]"},
		{"NUL in an env value", func(s *Spec) { s.Env = []string{"A=x\x00y"} }, "env[0]"},
		{"absolute work dir", func(s *Spec) { s.WorkDir = "/etc" }, "workDir"},
		{"work dir climbing out", func(s *Spec) { s.WorkDir = "a/../../x" }, "workDir"},
		{"negative CPU", func(s *Spec) { s.CPUMillicores = -1 }, "cpuMillicores"},
		{"negative memory", func(s *Spec) { s.MemoryMiB = -1 }, "memoryMiB"},
		{"negative disk", func(s *Spec) { s.DiskMiB = -1 }, "diskMiB"},
		{"negative timeout", func(s *Spec) { s.Timeout = -1 }, "timeout"},
		{"negative grace", func(s *Spec) { s.Grace = -1 }, "grace"},
		{"output limit too large", func(s *Spec) { s.OutputLimitBytes = MaxOutputLimitBytes + 1 }, "outputLimitBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			s.Argv = append([]string(nil), ok.Argv...)
			tc.change(&s)
			err := s.Validate()
			var e *cubefleet.Error
			if !errors.As(err, &e) || e.Code != cubefleet.CodeInvalidInput || e.Details["path"] != tc.path {
				t.Fatalf("Validate() = %v, want INVALID_INPUT at %s", err, tc.path)
			}
		})
	}
	// Every broken rule is reported, and no env value is repeated.
	bad := Spec{ID: "", Argv: nil, Env: []string{"SECRET_VALUE_ONLY", "OK=fine", "BAD-NAME=hunter2"}}
	err := bad.Validate()
	var e *cubefleet.Error
	if !errors.As(err, &e) || len(e.Details["errors"].([]cubefleet.FieldError)) != 4 {
		t.Fatalf("Validate() = %v, want 4 problems", err)
	}
	for _, fe := range e.Details["errors"].([]cubefleet.FieldError) {
		if strings.Contains(fe.Message, "hunter2") || strings.Contains(fe.Message, "SECRET_VALUE_ONLY") {
			t.Errorf("%s: %s repeats an env entry", fe.Path, fe.Message)
		}
	}
}

func TestSpecValidateWarm(t *testing.T) {
	if err := (Spec{ID: "w", MemoryMiB: 64}).ValidateWarm(); err != nil {
		t.Fatalf("valid warm spec refused: %v", err)
	}
	for path, s := range map[string]Spec{
		"argv": {ID: "w", Argv: []string{"true"}},
		"env":  {ID: "w", Env: []string{"A=1"}},
		"id":   {ID: ""},
	} {
		var e *cubefleet.Error
		if err := s.ValidateWarm(); !errors.As(err, &e) || e.Details["path"] != path {
			t.Errorf("ValidateWarm(%+v) = %v, want INVALID_INPUT at %s", s, err, path)
		}
	}
	if (Status{State: StateWarm}).Ended() || (Status{State: StateRunning}).Ended() || !(Status{State: StateKilled}).Ended() {
		t.Error("Ended: warm and running are not final, killed is")
	}
}

func TestReasonState(t *testing.T) {
	for r, want := range map[Reason]State{
		"": StateRunning, ReasonExited: StateExited, ReasonFailed: StateFailed,
		ReasonTimeout: StateKilled, ReasonStopped: StateKilled, ReasonLost: StateLost,
	} {
		if got := r.State(); got != want {
			t.Errorf("Reason(%q).State() = %s, want %s", r, got, want)
		}
	}
}

func TestDefaultsAndNames(t *testing.T) {
	var s Spec
	if s.GraceOrDefault() != DefaultGrace || s.OutputLimitOrDefault() != DefaultOutputLimitBytes {
		t.Error("zero Grace or OutputLimitBytes do not give the defaults")
	}
	if got := EnvNames([]string{"A=1", "TOKEN=secret=x", "B"}); strings.Join(got, ",") != "A,TOKEN,B" {
		t.Errorf("EnvNames = %v", got)
	}
	if m := TruncationMarker(1000); m != "\n[cubefleet: output truncated after 1000 bytes]\n" {
		t.Errorf("TruncationMarker = %q", m)
	}
}

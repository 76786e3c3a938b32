package client

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/cubefleet/cubefleet/internal/capool"
	"github.com/cubefleet/cubefleet/internal/privatefile"
)

// Defaults of the connection (docs/cli.md, "Connection").
const (
	DefaultURL       = "http://127.0.0.1:3010"
	DefaultTokenFile = ".cubefleet/admin.token" // relative to the working directory; written by `cubefleet server --dev`
	EnvURL           = "CUBEFLEET_URL"
	EnvToken         = "CUBEFLEET_TOKEN"
	// EnvCAFile names a PEM bundle of CA certificates trusted for https:// control planes, in
	// addition to the system's (the --ca-file flag beats it; it beats ca_file in the config file).
	EnvCAFile = "CUBEFLEET_CA_FILE"
)

// Options are the connection settings of a command line; "" means not given.
type Options struct {
	URL       string // --url
	TokenFile string // --token-file
	CAFile    string // --ca-file
	// Getenv reads the environment (CUBEFLEET_URL, CUBEFLEET_TOKEN, CUBEFLEET_CA_FILE,
	// XDG_CONFIG_HOME, HOME); nil means os.Getenv.
	Getenv func(string) string
}

// Config is the CLI's config file, $XDG_CONFIG_HOME/cubefleet/config.json (XDG_CONFIG_HOME
// defaults to ~/.config): {"url": "...", "token_file": "...", "ca_file": "..."}. A relative
// token_file or ca_file is relative to the config file's directory; "~/" is the home directory.
// Any other key (names are exact) is refused, naming it and the known keys.
type Config struct {
	URL       string `json:"url,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
	// CAFile is a PEM bundle of CA certificates trusted for an https:// URL, in addition to the
	// system's.
	CAFile string `json:"ca_file,omitempty"`
}

// Settings are a resolved connection: where to call and with which key, and where each came
// from (a flag, an environment variable, the config file or the default), for messages.
type Settings struct {
	URL       string
	URLSource string
	// URLs are the replicas of the control plane the setting names, comma-separated
	// ("https://cp1:3010,https://cp2:3010"); URL is the first. A long poll that loses its
	// replica calls the next one (see Client.Replicas).
	URLs        []string
	Token       string // "" when no key was found (the default token file is missing)
	TokenSource string
	// CAFile is the PEM bundle of CA certificates trusted besides the system's, "" for none;
	// CAFileSource says where it came from (--ca-file, CUBEFLEET_CA_FILE or the config file).
	CAFile       string
	CAFileSource string
	// RootCAs are the system's CA certificates plus CAFile's; nil when CAFile is "" (the
	// system's only).
	RootCAs *x509.CertPool
}

// ConfigPath returns the config file's path ("" when neither XDG_CONFIG_HOME nor HOME is set).
func ConfigPath(getenv func(string) string) string {
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" {
		return filepath.Join(dir, "cubefleet", "config.json")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "cubefleet", "config.json")
	}
	return ""
}

// LoadConfig reads the config file at path; a missing file is an empty Config.
func LoadConfig(path string) (Config, error) {
	var c Config
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("config file: %w", err)
	}
	known := ConfigKeys()
	var keys map[string]json.RawMessage
	err = json.Unmarshal(data, &keys)
	if err == nil {
		err = json.Unmarshal(data, &c)
	}
	if err != nil {
		return Config{}, fmt.Errorf("config file %s is not a JSON object with %s and %s: %w", path,
			strings.Join(known[:len(known)-1], ", "), known[len(known)-1], err)
	}
	names := slices.Sorted(maps.Keys(keys))
	for _, k := range names {
		if slices.Contains(known, k) {
			continue
		}
		hint := ""
		for _, want := range known {
			if strings.EqualFold(strings.ReplaceAll(k, "-", "_"), want) {
				hint = "did you mean " + want + "? "
			}
		}
		return Config{}, fmt.Errorf("config file %s: unknown key %q (%sthe known keys are %s)", path, k, hint, strings.Join(known, ", "))
	}
	return c, nil
}

// ConfigKeys returns the keys of the config file, in Config's order (its JSON names).
func ConfigKeys() []string {
	t := reflect.TypeFor[Config]()
	keys := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// Resolve finds the URL (--url > CUBEFLEET_URL > url in the config file > DefaultURL), the
// key (--token-file > CUBEFLEET_TOKEN > token_file in the config file > DefaultTokenFile) and
// the CA bundle (--ca-file > CUBEFLEET_CA_FILE > ca_file in the config file > none). A token
// file must be a regular file owned by the caller with mode 0600; a refusal names the file and
// the problem, never the key. Only the default token file may be missing (Token is then "").
// A CA file that cannot be read or holds no PEM certificate is an error naming it and where it
// came from.
func Resolve(o Options) (Settings, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfgPath := ConfigPath(getenv)
	var cfg Config
	needCfg := (o.URL == "" && getenv(EnvURL) == "") || (o.TokenFile == "" && getenv(EnvToken) == "") ||
		(o.CAFile == "" && getenv(EnvCAFile) == "")
	if needCfg {
		var err error
		if cfg, err = LoadConfig(cfgPath); err != nil {
			return Settings{}, err
		}
	}
	var s Settings
	switch {
	case o.URL != "":
		s.URL, s.URLSource = o.URL, "--url"
	case getenv(EnvURL) != "":
		s.URL, s.URLSource = getenv(EnvURL), EnvURL
	case cfg.URL != "":
		s.URL, s.URLSource = cfg.URL, "url in "+cfgPath
	default:
		s.URL, s.URLSource = DefaultURL, "the default"
	}
	for u := range strings.SplitSeq(s.URL, ",") {
		u = strings.TrimSpace(u)
		if err := checkURL(u); err != nil {
			return Settings{}, fmt.Errorf("control plane URL from %s: %w", s.URLSource, err)
		}
		s.URLs = append(s.URLs, u)
	}
	s.URL = s.URLs[0]
	switch {
	case o.TokenFile != "":
		tok, err := readToken(o.TokenFile)
		if err != nil {
			return Settings{}, fmt.Errorf("--token-file: %w", err)
		}
		s.Token, s.TokenSource = tok, "--token-file "+o.TokenFile
	case getenv(EnvToken) != "":
		s.Token, s.TokenSource = strings.TrimSpace(getenv(EnvToken)), EnvToken
	case cfg.TokenFile != "":
		path := expandPath(cfg.TokenFile, filepath.Dir(cfgPath), getenv)
		tok, err := readToken(path)
		if err != nil {
			return Settings{}, fmt.Errorf("token_file in %s: %w", cfgPath, err)
		}
		s.Token, s.TokenSource = tok, path
	default:
		tok, err := readToken(DefaultTokenFile)
		if errors.Is(err, os.ErrNotExist) {
			s.TokenSource = "none"
			break
		}
		if err != nil {
			return Settings{}, fmt.Errorf("default token file: %w", err)
		}
		s.Token, s.TokenSource = tok, DefaultTokenFile
	}
	switch {
	case o.CAFile != "":
		s.CAFile, s.CAFileSource = o.CAFile, "--ca-file"
	case getenv(EnvCAFile) != "":
		s.CAFile, s.CAFileSource = getenv(EnvCAFile), EnvCAFile
	case cfg.CAFile != "":
		s.CAFile, s.CAFileSource = expandPath(cfg.CAFile, filepath.Dir(cfgPath), getenv), "ca_file in "+cfgPath
	}
	if s.CAFile != "" {
		pool, err := capool.Load(s.CAFile)
		if err != nil {
			return Settings{}, fmt.Errorf("CA file from %s: %w", s.CAFileSource, err)
		}
		s.RootCAs = pool
	}
	return s, nil
}

// Connect resolves o and returns a client for it. httpClient nil means one that refuses
// redirects and trusts, for https://, the system's CAs plus the resolved CA file's (TLS 1.2 or
// later); a given httpClient is used as it is.
func Connect(o Options, httpClient *http.Client) (*Client, error) {
	s, err := Resolve(o)
	if err != nil {
		return nil, err
	}
	if httpClient == nil {
		httpClient = newHTTPClient(s.RootCAs)
	}
	var c *Client
	for i, u := range s.URLs {
		r := New(u, s.Token, httpClient)
		r.caFile = s.CAFile
		if s.Token == "" {
			if abs, err := filepath.Abs(DefaultTokenFile); err == nil {
				r.noKeyFile = abs
			}
		}
		if i == 0 {
			c = r
		}
		c.replicas = append(c.replicas, r)
	}
	return c, nil
}

// Replicas returns a client for each control plane URL the settings named, this one first
// (just this one for a single URL); they share the key and the HTTP client.
func (c *Client) Replicas() []*Client {
	if len(c.replicas) == 0 {
		return []*Client{c}
	}
	return c.replicas
}

func checkURL(s string) error {
	if !strings.Contains(s, "://") {
		// host:port, as for --listen: the scheme is missing.
		return fmt.Errorf("%q has no scheme: did you mean http://%s (or https://%s for a control plane that serves TLS)?", s, s, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want http://HOST:PORT or https://HOST:PORT", s)
	}
	if u.User != nil {
		return fmt.Errorf("the URL must not carry credentials; use a token file")
	}
	return nil
}

// readToken reads a key from a private file (privatefile.Check), trimming white space.
func readToken(path string) (string, error) {
	data, err := privatefile.Read(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("token file %s: %w", path, os.ErrNotExist)
		}
		return "", err
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s holds more than one line; it must hold only the API key", path)
	}
	return tok, nil
}

func expandPath(p, base string, getenv func(string) string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home := getenv("HOME"); home != "" {
			return filepath.Join(home, rest)
		}
	}
	if !filepath.IsAbs(p) && base != "" {
		return filepath.Join(base, p)
	}
	return p
}

package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml this test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   any               `yaml:"depends_on"` // a list, or a map of conditions
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		User        string            `yaml:"user"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// dependsOn lists the services a compose service depends on.
func dependsOn(v any) []string {
	var out []string
	switch d := v.(type) {
	case []any:
		for _, s := range d {
			out = append(out, s.(string))
		}
	case map[string]any:
		for s := range d {
			out = append(out, s)
		}
	}
	return out
}

// No Docker engine runs here, so check docker-compose.yml's
// structure instead: three NATS nodes whose mounted configs parse with
// nats-server's own parser and route to each other, and an engine built
// from the Dockerfile whose command line the binary accepts.
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		svc, ok := c.Services[n]
		if !ok {
			t.Fatalf("service %s missing", n)
		}
		// The nats-server version the tests embed.
		if want := "nats:" + strings.Join(strings.Split(server.VERSION, ".")[:2], "."); !strings.HasPrefix(svc.Image, want) {
			t.Errorf("%s image %q, want %s (the version the tests embed)", n, svc.Image, want)
		}
		if len(svc.Healthcheck.Test) == 0 {
			t.Errorf("%s has no healthcheck", n)
		}
		if _, ok := c.Volumes[n+"-data"]; !ok || !slices.Contains(svc.Volumes, n+"-data:/data") {
			t.Errorf("%s keeps its data in no named volume: %v", n, svc.Volumes)
		}
		var conf string
		for _, v := range svc.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if strings.HasSuffix(host, n+".conf") {
				conf = filepath.Join("..", host)
			}
			if strings.HasPrefix(host, "./") {
				if _, err := os.Stat(filepath.Join("..", host)); err != nil {
					t.Errorf("%s mounts %s: %v", n, host, err)
				}
			}
		}
		opts, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Fatalf("%s config %s: %v", n, conf, err)
		}
		if !opts.JetStream || opts.ServerName != n || opts.Cluster.Name != "tools" || len(opts.Routes) != 3 {
			t.Errorf("%s: jetstream=%v name=%q cluster=%q routes=%d", n, opts.JetStream, opts.ServerName, opts.Cluster.Name, len(opts.Routes))
		}
		if len(opts.Users) < 6 {
			t.Errorf("%s: %d users, want the per-channel users of accounts.conf", n, len(opts.Users))
		}
	}
	eng, ok := c.Services["engine"]
	if !ok || eng.Build == nil {
		t.Fatal("engine service missing or not built from the Dockerfile")
	}
	if _, err := os.Stat("../Dockerfile"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if !slices.Contains(dependsOn(eng.DependsOn), n) || !strings.Contains(eng.Environment["ENGINE_NATS_URL"], "nats://"+n+":4222") {
			t.Errorf("engine does not depend on and connect to %s", n)
		}
	}
	help, err := exec.Command(engineBin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("engine serve --help: %v\n%s", err, help)
	}
	for _, arg := range eng.Command {
		if strings.HasPrefix(arg, "--") && !strings.Contains(string(help), arg) {
			t.Errorf("compose passes %s, which engine serve does not know", arg)
		}
	}
	for env := range eng.Environment {
		if !strings.Contains(string(help), env) {
			t.Errorf("compose sets %s, which engine serve does not read", env)
		}
	}
}

// The documented single-server config parses and defines the
// per-channel users.
func TestServerConfigParses(t *testing.T) {
	opts, err := server.ProcessConfigFile("../deploy/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, u := range opts.Users {
		users = append(users, u.Username)
	}
	slices.Sort(users)
	want := []string{"admin", "auditor", "backend", "engine", "engine-api", "eraser", "slack", "tui", "web"} // eraser: the erase path
	if !slices.Equal(users, want) {
		t.Fatalf("users %v, want %v", users, want)
	}
}

// The container set-up a newcomer runs: every published port on
// the host's loopback, healthchecks the images can run (the engine checks
// itself with its own binary), a non-root engine and a .dockerignore that
// keeps data and VCS out of the build context.
func TestComposeHardening(t *testing.T) {
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	for name, svc := range c.Services {
		for _, p := range svc.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q on every host interface, want 127.0.0.1:...", name, p)
			}
		}
	}
	eng := c.Services["engine"]
	if eng.User == "" || strings.HasPrefix(eng.User, "0") || eng.User == "root" {
		t.Errorf("engine runs as user %q, want a non-root user", eng.User)
	}
	if len(eng.Healthcheck.Test) < 2 || eng.Healthcheck.Test[1] != "/engine" {
		t.Fatalf("engine healthcheck %v, want the engine binary itself", eng.Healthcheck.Test)
	}
	if out, err := exec.Command(engineBin, append(eng.Healthcheck.Test[2:], "--help")...).CombinedOutput(); err != nil {
		t.Errorf("engine %v --help: %v\n%s", eng.Healthcheck.Test[2:], err, out)
	}
	docker, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"USER nonroot", "HEALTHCHECK", `"/engine", "healthcheck"`} {
		if !strings.Contains(string(docker), want) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "engine-data"} {
		if !slices.Contains(strings.Fields(string(ignore)), want) {
			t.Errorf(".dockerignore does not list %s", want)
		}
	}
}

// Engine healthcheck exits 0 against a ready engine and 1
// against an address where none runs.
func TestHealthcheckCommand(t *testing.T) {
	p := startEngine(t, t.TempDir())
	if out, err := exec.Command(engineBin, "healthcheck", "--server", strings.TrimPrefix(p.HTTPURL, "http://")).CombinedOutput(); err != nil {
		t.Fatalf("healthcheck of a ready engine: %v\n%s", err, out)
	}
	p.Stop(t)
	out, err := exec.Command(engineBin, "healthcheck", "--server", p.HTTPURL).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "is `engine serve` running at") {
		t.Fatalf("healthcheck of a stopped engine: %v\n%s", err, out)
	}
}

package tests

import (
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
		DependsOn   []string          `yaml:"depends_on"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

// Issue 8: no Docker engine runs here, so check docker-compose.yml's
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
		if !strings.HasPrefix(svc.Image, "nats:2.1") {
			t.Errorf("%s image %q, want nats:2.12 or later (atomic batches)", n, svc.Image)
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
		if !slices.Contains(eng.DependsOn, n) || !strings.Contains(eng.Environment["ENGINE_NATS_URL"], "nats://"+n+":4222") {
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

// Issue 5: the documented single-server config parses and defines the
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
	want := []string{"admin", "auditor", "backend", "engine", "engine-api", "slack", "tui", "web"}
	if !slices.Equal(users, want) {
		t.Fatalf("users %v, want %v", users, want)
	}
}

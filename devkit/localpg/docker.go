package localpg

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// dockerProbeTimeout bounds the check for a Docker engine, so that a machine
// without one (a CLI but no daemon) falls through at once.
const dockerProbeTimeout = time.Second

// dockerAnswers reports whether a Docker engine answers: at DOCKER_HOST when
// set, otherwise on one of the usual sockets (Docker Engine, rootless Docker,
// Docker Desktop, Colima, Rancher Desktop). It only dials and pings; it does
// not go through testcontainers, which is slow and noisy when there is none.
func dockerAnswers(ctx context.Context, env func(string) (string, bool)) bool {
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()

	if host, ok := env("DOCKER_HOST"); ok && host != "" {
		u, err := url.Parse(host)
		if err != nil {
			return false
		}
		switch u.Scheme {
		case "unix":
			return pingDockerSocket(ctx, u.Path)
		case "tcp":
			// Possibly TLS: a connection is answer enough for a first check.
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
			if err != nil {
				return false
			}
			_ = conn.Close()
			return true
		default:
			// ssh:// and the like cannot be probed cheaply; let testcontainers try.
			return true
		}
	}

	for _, socket := range dockerSockets(env) {
		if pingDockerSocket(ctx, socket) {
			return true
		}
	}
	return false
}

func dockerSockets(env func(string) (string, bool)) []string {
	sockets := []string{"/var/run/docker.sock"}
	if dir, ok := env("XDG_RUNTIME_DIR"); ok && dir != "" {
		sockets = append(sockets, filepath.Join(dir, "docker.sock"))
	}
	sockets = append(sockets, filepath.Join("/run/user", strconv.Itoa(os.Getuid()), "docker.sock"))
	if home, ok := env("HOME"); ok && home != "" {
		sockets = append(sockets,
			filepath.Join(home, ".docker", "run", "docker.sock"),
			filepath.Join(home, ".docker", "desktop", "docker.sock"),
			filepath.Join(home, ".colima", "default", "docker.sock"),
			filepath.Join(home, ".colima", "docker.sock"),
			filepath.Join(home, ".rd", "docker.sock"),
		)
	}
	return sockets
}

// pingDockerSocket asks the engine behind a unix socket for GET /_ping.
func pingDockerSocket(ctx context.Context, path string) bool {
	if info, err := os.Stat(path); err != nil || info.Mode().Type() != os.ModeSocket {
		return false
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

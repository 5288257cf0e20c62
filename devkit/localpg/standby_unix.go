//go:build unix

package localpg

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
)

// baseBackup fills the empty data folder with a copy of the primary Config.StandbyOf
// (pg_basebackup -R, WAL streamed alongside): the server started on it is a standby
// that streams from that primary. The superuser's password is the primary's, kept
// beside the folder as for a cluster of its own.
func (c *cluster) baseBackup(ctx context.Context) error {
	u, err := url.Parse(c.standbyOf)
	if err != nil {
		return fmt.Errorf("the primary's URL: %w", err)
	}
	password, _ := u.User.Password()
	if password == "" {
		return fmt.Errorf("the primary's URL names no password: give the URL of a private cluster (Postgres.URL)")
	}
	c.password = password
	if err := writePassword(c.passwordPath(), c.password); err != nil {
		return err
	}
	c.logger.InfoContext(ctx, "copying the primary into a standby's data folder", slog.String("data_dir", c.dataDir))
	// The password reaches pg_basebackup in its environment, never in its arguments.
	conninfo := fmt.Sprintf("host=%s port=%s user=%s application_name=standby", u.Hostname(), u.Port(), u.User.Username())
	args := []string{"-D", c.dataDir, "-d", conninfo, "-R", "-X", "stream", "-c", "fast"}
	if !c.durable {
		args = append(args, "--no-sync")
	}
	cmd := c.command(ctx, "pg_basebackup", args...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+c.password)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup into %s: %w\n%s", c.dataDir, err, lastLines(string(out), logTailLines))
	}
	return nil
}

//go:build unix

package localpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The superuser of a private cluster authenticates with a password (scram-sha-256),
// not trust: with trust, any local user could connect to 127.0.0.1 as a superuser.
// The password is generated when the cluster is initialised and kept beside the data
// folder, in <data folder>.password (mode 0600, readable by this process's user only).

// passwordPath is where the cluster's superuser password is kept.
func (c *cluster) passwordPath() string { return c.dataDir + ".password" }

// newPassword returns 32 random hex digits.
func newPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	return hex.EncodeToString(b[:])
}

// writePassword writes the password file of the cluster (path: passwordPath, or its
// ".new" form while an older cluster is being converted).
func writePassword(path, password string) error {
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("keep the Postgres password: %w", err)
	}
	return os.Chmod(path, 0o600)
}

// readPassword reads a password file; ok is false when there is none.
func readPassword(path string) (password string, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the Postgres password: %w", err)
	}
	return strings.TrimSpace(string(b)), true, nil
}

// trustLine matches a pg_hba.conf rule whose method is trust.
var trustLine = regexp.MustCompile(`(?m)^(\s*(?:local|host)\S*\s.*\s)trust(\s*)$`)

// convertToPassword turns a cluster initialised with trust authentication (by an older
// oncebox) into one that asks for c.password: it sets the superuser's password (trust
// still lets this process in), rewrites pg_hba.conf to scram-sha-256 and reloads. The
// password is kept in a ".new" file first, so that a conversion cut short is finished
// with the same password by the next start.
func (c *cluster) convertToPassword(ctx context.Context) error {
	pending := c.passwordPath() + ".new"
	if err := writePassword(pending, c.password); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return fmt.Errorf("connect to set the Postgres password: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'"); err != nil {
		return fmt.Errorf("set the Postgres password: %w", err)
	}
	// The password is hex digits: safe to quote as a literal.
	if _, err := conn.Exec(ctx, "ALTER ROLE postgres PASSWORD '"+c.password+"'"); err != nil {
		return fmt.Errorf("set the Postgres password: %w", err)
	}
	hba := filepath.Join(c.dataDir, "pg_hba.conf")
	rules, err := os.ReadFile(hba)
	if err != nil {
		return fmt.Errorf("read pg_hba.conf: %w", err)
	}
	if err := os.WriteFile(hba, trustLine.ReplaceAll(rules, []byte("${1}scram-sha-256${2}")), 0o600); err != nil {
		return fmt.Errorf("rewrite pg_hba.conf: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload pg_hba.conf: %w", err)
	}
	if err := os.Rename(pending, c.passwordPath()); err != nil {
		return fmt.Errorf("keep the Postgres password: %w", err)
	}
	c.logger.InfoContext(ctx, "private Postgres now asks for a password (it used trust authentication)",
		slog.String("data_dir", c.dataDir), slog.String("password_file", c.passwordPath()))
	return nil
}

package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-jose/go-jose/v4"
)

// key returns the issuer's public key kid, reading the keys again when they are old,
// or when kid is not among them and they were not read in the last KeyRefreshInterval
// (the issuer rotated its keys).
func (v *Verifier) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.cfg.Now()
	stale := v.keys == nil || now.Sub(v.readAt) >= v.cfg.KeyMaxAge
	if !stale {
		if k := pick(v.keys, kid); k != nil {
			return k, nil
		}
		stale = now.Sub(v.readAt) >= v.cfg.KeyRefreshInterval
	}
	if stale {
		keys, err := v.read(ctx)
		if err != nil {
			if v.keys == nil {
				return nil, refused("it cannot be checked now: the authorization server's keys could not be read (%v); retry later", err)
			}
		} else {
			v.keys, v.readAt = keys, now
		}
	}
	if k := pick(v.keys, kid); k != nil {
		return k, nil
	}
	return nil, refused("it is signed by a key (kid %q) that the issuer does not publish: a retired key, or another issuer's", kid)
}

// pick returns the signing key kid of set (the only signing key when kid is empty).
func pick(set *jose.JSONWebKeySet, kid string) *jose.JSONWebKey {
	var found []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Use != "enc" && k.IsPublic() && (kid == "" || k.KeyID == kid) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return nil
	}
	return &found[0]
}

// read reads the issuer's metadata (once) and its key set.
func (v *Verifier) read(ctx context.Context) (*jose.JSONWebKeySet, error) {
	if v.jwksURI == "" {
		uri, err := v.discover(ctx)
		if err != nil {
			return nil, err
		}
		v.jwksURI = uri
	}
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, v.cfg.HTTPClient, v.jwksURI, &set); err != nil {
		return nil, fmt.Errorf("jwks_uri: %w", err)
	}
	return &set, nil
}

// metadataURLs are where an issuer's metadata may be: RFC 8414's path insertion, then
// OpenID Connect discovery's insertion and appending.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.Trim(u.Path, "/")
	at := func(p string) string { c := *u; c.Path = p; return c.String() }
	if path == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	return []string{at("/.well-known/oauth-authorization-server/" + path), at("/.well-known/openid-configuration/" + path),
		at("/" + path + "/.well-known/openid-configuration")}
}

// discover returns the issuer's jwks_uri from its metadata, whose issuer must be it.
func (v *Verifier) discover(ctx context.Context) (string, error) {
	var errs []error
	for _, u := range metadataURLs(v.cfg.Issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, v.cfg.HTTPClient, u, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if strings.TrimSuffix(meta.Issuer, "/") != strings.TrimSuffix(v.cfg.Issuer, "/") {
			return "", fmt.Errorf("the metadata at %s names the issuer %q, not %q", u, meta.Issuer, v.cfg.Issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("the metadata at %s names no jwks_uri", u)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("no metadata for issuer %s: %w", v.cfg.Issuer, errors.Join(errs...))
}

func getJSON(ctx context.Context, c *http.Client, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(dst); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/oncebox/oncebox/vendoraccount"
)

// ownableVendor says whether a tenant may claim the installation's account at vendor:
// Stripe's, or a catalog target's (the vendors whose objects a tenant adopts).
func ownableVendor(vendor string) bool {
	return vendor == "stripe" || (strings.HasPrefix(vendor, "catalog_") && len(vendor) > len("catalog_"))
}

// own is `oncebox tenant vendor own`: the only tenant claims the installation's own
// account at vendor, recorded with who and when, so that its ops act on the objects
// made there outside oncebox without adopting them one by one. Refused when another
// tenant exists.
func (c vendorCtx) own(ctx context.Context, vendor string) error {
	t, err := c.store.ByName(ctx, *c.f.tenant)
	if err != nil {
		return err
	}
	if err := c.settings.Own(ctx, t.ID, vendor, cliActor()); err != nil {
		if errors.Is(err, vendoraccount.ErrNotOnlyTenant) {
			return &exitError{code: 1, err: err}
		}
		return err
	}
	fmt.Fprintf(os.Stderr, "tenant %q now owns every object in the installation's %s account, without adoption, "+
		"while it is the only tenant (a second tenant ends this; undo with: oncebox tenant vendor disown --tenant %s %s)\n",
		t.Name, vendor, t.Name, vendor)
	return nil
}

// disown is `oncebox tenant vendor disown`: the claim of own removed.
func (c vendorCtx) disown(ctx context.Context, vendor string) error {
	t, err := c.store.ByName(ctx, *c.f.tenant)
	if err != nil {
		return err
	}
	removed, err := c.settings.Disown(ctx, t.ID, vendor)
	if err != nil {
		return err
	}
	if !removed {
		return &exitError{code: 1, err: fmt.Errorf("tenant %q does not own the installation's %s account", t.Name, vendor)}
	}
	fmt.Fprintf(os.Stderr, "tenant %q no longer owns the installation's %s account: objects made outside oncebox need adoption again\n", t.Name, vendor)
	return nil
}

package cells

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Home is the name of the home cell: the database of DATABASE_URL, which holds the
// directory and every tenant the directory does not place elsewhere.
const Home = "home"

// idShift places a cell's ids: its identity sequences start at number << idShift, so a
// tenant's rows keep their ids when it moves (2^44 ids per cell, 8,192 cells).
const idShift = 44

// sequences are the identity sequences and version counters of tenants' rows, which a
// cell's number places (AddCell). River's job ids and the installation's own rows
// (vendor events, installation policies) are not moved and stay per cell.
var sequences = []string{
	"oncebox_tenant_id_seq", "oncebox_api_token_id_seq", "oncebox_attempt_id_seq",
	"oncebox_op_event_id_seq", "oncebox_identity_match_id_seq", "oncebox_audit_seq",
	"oncebox_approval_policy_version", "oncebox_tenant_budget_version",
}

var cellName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// ErrUnknownCell is returned for a cell the directory does not list.
var ErrUnknownCell = errors.New("unknown cell")

// Cell is one cell of the directory.
type Cell struct {
	Name   string
	Number int
}

// Placement is where the directory puts a tenant: its cell, and the cell a move is
// taking it to ("" when none is).
type Placement struct {
	Cell     string
	MovingTo string
}

// Directory is the directory's cache in one process: every tenant placed outside the
// home cell, read from the home cell's database and refreshed (Run). A lookup is a map
// read; a tenant it does not list is in the home cell.
type Directory struct {
	pool *pgxpool.Pool

	mu      sync.RWMutex
	tenants map[string]Placement
	loaded  time.Time
}

// NewDirectory returns the directory of the installation whose home cell pool is
// connected to. Call Refresh before the first Lookup.
func NewDirectory(pool *pgxpool.Pool) *Directory {
	return &Directory{pool: pool, tenants: map[string]Placement{}}
}

const sqlPlacements = `SELECT tenant, cell, coalesce(moving_to, '') FROM oncebox_cell_tenant`

// Refresh reads the whole directory again.
func (d *Directory) Refresh(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, sqlPlacements)
	if err != nil {
		return fmt.Errorf("cells: read the directory: %w", err)
	}
	tenants := map[string]Placement{}
	for rows.Next() {
		var name string
		var p Placement
		if err := rows.Scan(&name, &p.Cell, &p.MovingTo); err != nil {
			rows.Close()
			return fmt.Errorf("cells: read the directory: %w", err)
		}
		tenants[name] = p
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cells: read the directory: %w", err)
	}
	d.mu.Lock()
	d.tenants, d.loaded = tenants, time.Now()
	d.mu.Unlock()
	return nil
}

// Run refreshes the directory every interval until ctx ends; a failed read keeps what
// was read before (the home cell being down leaves every other cell's tenants served
// as placed).
func (d *Directory) Run(ctx context.Context, every time.Duration, onErr func(error)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		err := d.Refresh(rctx)
		cancel()
		if err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
	}
}

// Lookup returns the tenant's placement: the home cell when the directory does not list
// it.
func (d *Directory) Lookup(tenant string) Placement {
	d.mu.RLock()
	p, ok := d.tenants[tenant]
	d.mu.RUnlock()
	if !ok {
		return Placement{Cell: Home}
	}
	return p
}

// Loaded returns when the directory was last read.
func (d *Directory) Loaded() time.Time {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.loaded
}

// Placed reads one tenant's placement from the directory's database (not the cache).
func Placed(ctx context.Context, home *pgxpool.Pool, tenant string) (Placement, error) {
	var p Placement
	err := home.QueryRow(ctx, `SELECT cell, coalesce(moving_to, '') FROM oncebox_cell_tenant WHERE tenant = $1`, tenant).
		Scan(&p.Cell, &p.MovingTo)
	if errors.Is(err, pgx.ErrNoRows) {
		return Placement{Cell: Home}, nil
	}
	if err != nil {
		return Placement{}, fmt.Errorf("cells: read %q's placement: %w", tenant, err)
	}
	return p, nil
}

// List returns the directory's cells, by number.
func List(ctx context.Context, home *pgxpool.Pool) ([]Cell, error) {
	rows, err := home.Query(ctx, `SELECT name, number FROM oncebox_cell ORDER BY number`)
	if err != nil {
		return nil, fmt.Errorf("cells: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cell, error) {
		var c Cell
		err := r.Scan(&c.Name, &c.Number)
		return c, err
	})
}

// CheckName says whether name can name a cell.
func CheckName(name string) error {
	if !cellName.MatchString(name) {
		return fmt.Errorf("cells: a cell's name is 1 to 40 lower-case letters, digits and dashes, starting with a letter, not %q", name)
	}
	return nil
}

// AddCell registers the cell name, whose (migrated) database cell is connected to, in
// the directory of home, with the next free number, and starts its identity sequences
// at that number's range. Adding a cell again keeps its number and checks its
// sequences. A database that already holds tenants of its own is refused: their ids
// could be another cell's.
func AddCell(ctx context.Context, home, cell *pgxpool.Pool, name string) (Cell, error) {
	if err := CheckName(name); err != nil {
		return Cell{}, err
	}
	if name == Home {
		return Cell{}, fmt.Errorf("cells: %q is the database of DATABASE_URL, always a cell", Home)
	}
	c := Cell{Name: name}
	err := home.QueryRow(ctx, `
INSERT INTO oncebox_cell (name, number)
SELECT $1, coalesce(max(number), 0) + 1 FROM oncebox_cell
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING number`, name).Scan(&c.Number)
	if err != nil {
		return Cell{}, fmt.Errorf("cells: add %q to the directory: %w", name, err)
	}
	err = pgx.BeginFunc(ctx, cell, func(tx pgx.Tx) error {
		var foreign int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM oncebox_tenant WHERE id < $1 OR id >= $2`,
			int64(c.Number)<<idShift, int64(c.Number+1)<<idShift).Scan(&foreign); err != nil {
			return err
		}
		if foreign > 0 {
			return fmt.Errorf("its database already holds %d tenant(s) with ids outside the cell's range: use an empty database for a new cell", foreign)
		}
		for _, seq := range sequences {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT setval('%s', greatest((SELECT last_value FROM %s), $1))`, seq, seq),
				int64(c.Number)<<idShift); err != nil {
				return err
			}
		}
		// The cell knows its own name and number: serve checks that the database it was
		// given for a cell is that cell's.
		var self string
		err := tx.QueryRow(ctx, `SELECT name FROM oncebox_cell_self`).Scan(&self)
		if err == nil && self != name {
			return fmt.Errorf("its database is already cell %q", self)
		}
		var directory int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM oncebox_cell_tenant`).Scan(&directory); err != nil {
			return err
		}
		if directory > 0 {
			return errors.New("its database holds a directory: it is a home cell")
		}
		_, err = tx.Exec(ctx, `INSERT INTO oncebox_cell_self (name, number) VALUES ($1, $2)
ON CONFLICT (one) DO UPDATE SET number = EXCLUDED.number`, name, c.Number)
		return err
	})
	if err != nil {
		return Cell{}, fmt.Errorf("cells: set up cell %q: %w", name, err)
	}
	return c, nil
}

// CheckCell says whether the database cell is connected to is the directory's cell
// name: registered with the same number on both sides (AddCell).
func CheckCell(ctx context.Context, home, cell *pgxpool.Pool, name string) error {
	var want, got int
	if err := home.QueryRow(ctx, `SELECT number FROM oncebox_cell WHERE name = $1`, name).Scan(&want); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("cells: %w %q: the directory does not list it (run oncebox cell add %s --cell-url URL)", ErrUnknownCell, name, name)
		}
		return fmt.Errorf("cells: read the directory: %w", err)
	}
	if err := cell.QueryRow(ctx, `SELECT number FROM oncebox_cell_self WHERE name = $1`, name).Scan(&got); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("cells: the database given for cell %q was never set up as that cell (run oncebox cell add %s --cell-url URL)", name, name)
		}
		return fmt.Errorf("cells: read cell %q: %w", name, err)
	}
	if got != want {
		return fmt.Errorf("cells: the database given for cell %q is cell number %d, the directory's is %d: a wrong URL?", name, got, want)
	}
	return nil
}

// Place puts a new tenant in cell (the directory's row), before it is created there.
// Placing it in the home cell removes its row.
func Place(ctx context.Context, home *pgxpool.Pool, tenant, cell string) error {
	if cell == Home {
		if _, err := home.Exec(ctx, `DELETE FROM oncebox_cell_tenant WHERE tenant = $1 AND moving_to IS NULL`, tenant); err != nil {
			return fmt.Errorf("cells: place %q in %q: %w", tenant, cell, err)
		}
		return nil
	}
	tag, err := home.Exec(ctx, `INSERT INTO oncebox_cell_tenant (tenant, cell) SELECT $1, name FROM oncebox_cell WHERE name = $2
ON CONFLICT (tenant) DO UPDATE SET cell = EXCLUDED.cell, updated_at = now() WHERE oncebox_cell_tenant.moving_to IS NULL`, tenant, cell)
	if err != nil {
		return fmt.Errorf("cells: place %q in %q: %w", tenant, cell, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("cells: place %q in %q: %w, or the tenant is being moved", tenant, cell, ErrUnknownCell)
	}
	return nil
}

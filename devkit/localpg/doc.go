// Package localpg finds a Postgres for the test suite and for `oncebox dev`.
//
// Start tries, in order:
//
//  1. the environment: the first non-empty variable of Config.EnvVars
//     (DATABASE_URL by default) is returned as is, and Close does nothing;
//  2. a private cluster started from the PostgreSQL server binaries found on
//     the machine (PATH, /usr/lib/postgresql/*/bin highest version first,
//     /usr/pgsql-*/bin, Homebrew's postgresql* formulae). The cluster is
//     initialised with initdb the first time, kept in a data folder under the
//     user's cache directory and reused by later runs. It listens on a free
//     port (or Config.Port, so that a stopped cluster can be started again
//     under the same URL) of 127.0.0.1 only, with unix sockets disabled and
//     fsync off. When
//     the process runs as root, initdb and postgres run as the "postgres"
//     system user (or "nobody"), with the data folder under os.TempDir();
//  3. a container, when a Docker engine answers on its socket, started by
//     Config.Container (devkit/pgcontainer, testcontainers-go's Postgres
//     module; kept out of this package so that the oncebox binary links it only
//     when built with -tags devcontainer);
//  4. otherwise ErrNoPostgres, one sentence telling the user what to install.
//
// Probe says which of these Start would use without starting anything, for a test
// that should skip, rather than fail, on a machine with no Postgres at all.
//
// Each process holds an exclusive file lock on the data folder it uses, so
// two processes never start two postmasters on one folder: a second process
// takes the next free folder ("slot") instead. A postmaster orphaned by a
// process that died without calling Close is stopped by the next process that
// takes its slot.
//
// A test package typically starts one Postgres in TestMain and shares it:
//
//	func TestMain(m *testing.M) {
//		ctx := context.Background()
//		pg, err := localpg.Start(ctx, localpg.Config{
//			EnvVars: []string{"TEST_DATABASE_URL", "DATABASE_URL"},
//		})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		_ = pg.Close(ctx)
//		os.Exit(code)
//	}
//
// The URL returned by a private cluster or a container names a database
// (Config.Database, "oncebox" by default) that exists and that the caller owns
// as superuser; a reused private cluster keeps the data of earlier runs.
package localpg

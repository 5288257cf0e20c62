package console

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/tenant"
)

// TestAuditDownloadsAreCapped: past Config.AuditDownloads streaming at once, a
// download is refused with 429 and Retry-After before it reads anything (the console has
// no pool here: a read would panic).
func TestAuditDownloadsAreCapped(t *testing.T) {
	t.Parallel()
	pages, err := parsePages()
	require.NoError(t, err)
	slots := audit.NewSlots(1)
	require.True(t, slots.TryAcquire()) // one streams: the API's export, say
	c := &Console{cfg: Config{Logger: slog.New(slog.DiscardHandler), Now: time.Now, AuditDownloads: slots}, pages: pages}
	s := &sessionInfo{principal: &tenant.Principal{Tenant: tenant.Tenant{ID: 1, Name: "acme"}, Role: tenant.RoleAuditor, TokenID: 7}}
	rec := httptest.NewRecorder()
	c.auditDownload(rec, httptest.NewRequest(http.MethodGet, "/console/audit.csv", nil), s)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "already streaming")
	require.Equal(t, 1, slots.InUse(), "the refused download took no slot")
}

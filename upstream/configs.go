package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// DataScrubbing is config.datascrubbingSettings (docs/canaries.md): Sentry's
// project defaults, so Relay applies its default scrubbing rules.
type DataScrubbing struct {
	ScrubData        bool     `json:"scrubData"`
	ScrubDefaults    bool     `json:"scrubDefaults"`
	ScrubIPAddresses bool     `json:"scrubIpAddresses"`
	SensitiveFields  []string `json:"sensitiveFields"`
	ExcludeFields    []string `json:"excludeFields"`
}

// ProjectConfig is the "config" object of a ProjectState, limited to what
// the fake sets.
type ProjectConfig struct {
	AllowedDomains        []string          `json:"allowedDomains"`
	TrustedRelays         []string          `json:"trustedRelays"`
	DatascrubbingSettings DataScrubbing     `json:"datascrubbingSettings"`
	Features              []string          `json:"features"`
	FilterSettings        map[string]any    `json:"filterSettings,omitempty"`
	Quotas                []json.RawMessage `json:"quotas,omitempty"`
}

// PublicKeyConfig is one entry of ProjectState.publicKeys.
type PublicKeyConfig struct {
	PublicKey string `json:"publicKey"`
	NumericID int64  `json:"numericId"`
}

// ProjectState is what the fake answers for one key (docs/protocol.md,
// Project configs).
type ProjectState struct {
	Disabled       bool              `json:"disabled"`
	ProjectID      int64             `json:"projectId"`
	OrganizationID int64             `json:"organizationId"`
	Slug           string            `json:"slug"`
	PublicKeys     []PublicKeyConfig `json:"publicKeys"`
	Rev            string            `json:"rev"`
	LastChange     string            `json:"lastChange"`
	Config         ProjectConfig     `json:"config"`
}

// projectConfig is the config shared by every project.
func (s *Server) projectConfig() ProjectConfig {
	features := s.cfg.Features
	if features == nil {
		// Without these a managed Relay drops logs and (older Relays) spans
		// silently.
		features = []string{"organizations:ourlogs-ingestion", "organizations:standalone-span-ingestion"}
	}
	pc := ProjectConfig{
		AllowedDomains: []string{"*"},
		TrustedRelays:  []string{},
		DatascrubbingSettings: DataScrubbing{
			ScrubData: true, ScrubDefaults: true, ScrubIPAddresses: false,
			SensitiveFields: []string{}, ExcludeFields: []string{},
		},
		Features: append([]string(nil), features...),
		Quotas:   s.cfg.Quotas,
	}
	if s.cfg.InboundFilters {
		on := map[string]any{"isEnabled": true}
		pc.FilterSettings = map[string]any{"webCrawlers": on, "localhost": on, "browserExtensions": on,
			"legacyBrowsers": map[string]any{"isEnabled": true, "options": []string{"default"}}}
	}
	return pc
}

// ProjectState returns the state served for project index i (an index
// into Config.Projects); false when there is no such project.
func (s *Server) ProjectState(i int) (ProjectState, bool) {
	if i < 0 || i >= len(s.cfg.Projects) {
		return ProjectState{}, false
	}
	return s.projectState(i), true
}

func (s *Server) projectState(i int) ProjectState {
	p := s.cfg.Projects[i]
	return ProjectState{
		ProjectID:      p.ID,
		OrganizationID: p.OrgID,
		Slug:           p.Slug,
		PublicKeys:     []PublicKeyConfig{{PublicKey: p.PublicKey, NumericID: p.KeyID}},
		Rev:            fmt.Sprintf("%s-%d", s.configRev, p.ID),
		LastChange:     s.started.UTC().Format(time.RFC3339),
		Config:         s.projectConfig(),
	}
}

// globalConfig is what the fake answers for "global": true, modelled on
// Relay's mini_sentry (docs/protocol.md, The global config).
func globalConfig() map[string]any {
	type m = map[string]any
	ms := func(name, unit string) m { return m{"name": name, "unit": unit} }
	return m{
		"measurements": m{
			"builtinMeasurements": []m{
				ms("app_start_cold", "millisecond"), ms("app_start_warm", "millisecond"),
				ms("cls", "none"), ms("fcp", "millisecond"), ms("fid", "millisecond"),
				ms("fp", "millisecond"), ms("frames_frozen", "none"), ms("frames_frozen_rate", "ratio"),
				ms("frames_slow", "none"), ms("frames_slow_rate", "ratio"), ms("frames_total", "none"),
				ms("inp", "millisecond"), ms("lcp", "millisecond"), ms("stall_count", "none"),
				ms("stall_longest_time", "millisecond"), ms("stall_percentage", "ratio"),
				ms("stall_total_time", "millisecond"), ms("ttfb", "millisecond"),
				ms("ttfb.requesttime", "millisecond"), ms("time_to_full_display", "millisecond"),
				ms("time_to_initial_display", "millisecond"),
			},
			"maxCustomMeasurements": 10,
		},
		"filters": m{"version": 1, "filters": []m{}},
		"options": m{
			"relay.span-usage-metric":             true,
			"relay.session.processing.rollout":    1.0,
			"relay.endpoint-fetch-config.enabled": true,
		},
	}
}

func (s *Server) buildConfigs() error {
	pc, err := json.Marshal(s.projectConfig())
	if err != nil {
		return fmt.Errorf("upstream: project config: %w", err)
	}
	sum := sha256.Sum256(pc)
	s.configRev = hex.EncodeToString(sum[:8])
	s.globalJSON, err = json.Marshal(globalConfig())
	if err != nil {
		return fmt.Errorf("upstream: global config: %w", err)
	}
	return nil
}

type configsRequest struct {
	PublicKeys []string  `json:"publicKeys"`
	Revisions  []*string `json:"revisions"`
	FullConfig bool      `json:"fullConfig"`
	NoCache    bool      `json:"noCache"`
	Global     bool      `json:"global"`
}

type configsResponse struct {
	Configs      map[string]ProjectState `json:"configs"`
	Pending      []string                `json:"pending"`
	Unchanged    []string                `json:"unchanged"`
	Global       json.RawMessage         `json:"global,omitempty"`
	GlobalStatus string                  `json:"globalStatus,omitempty"`
}

// handleProjectConfigs serves project and global config requests
// (docs/protocol.md, Project configs and The global config).
func (s *Server) handleProjectConfigs(w http.ResponseWriter, req *http.Request, c *counters) *httpError {
	var q configsRequest
	if e := s.signedQuery(req, c, &q, "projectconfigs request"); e != nil {
		return e
	}
	version := req.URL.Query().Get("version")
	switch version {
	case "2", "3", "4":
	default:
		return newError(http.StatusBadRequest, "bad_config_version", "unsupported projectconfigs version", "want version=3, got "+version)
	}
	if len(q.PublicKeys) > MaxKeysPerRequest {
		return newError(http.StatusBadRequest, "too_many_keys", "too many public keys",
			fmt.Sprintf("%d keys > %d", len(q.PublicKeys), MaxKeysPerRequest))
	}
	resp := configsResponse{Configs: map[string]ProjectState{}, Pending: []string{}, Unchanged: []string{}}
	if q.Global && version != "2" {
		c.cfgGlobal.Add(1)
		resp.Global = s.globalJSON
		resp.GlobalStatus = "ready"
		if s.faults.Load().f.GlobalPending {
			resp.GlobalStatus = "pending"
			c.globalPendingServed.Add(1)
		}
	}
	if len(q.PublicKeys) > 0 {
		c.cfgProject.Add(1)
	}
	now := s.cfg.Now()
	for i, key := range q.PublicKeys {
		idx, ok := s.byKey[key]
		if !ok {
			c.keysUnknown.Add(1)
			continue
		}
		if s.isPending(idx, now) {
			c.keysPending.Add(1)
			resp.Pending = append(resp.Pending, key)
			continue
		}
		st := s.projectState(idx)
		if i < len(q.Revisions) && q.Revisions[i] != nil && *q.Revisions[i] == st.Rev {
			c.keysUnchanged.Add(1)
			resp.Unchanged = append(resp.Unchanged, key)
			continue
		}
		c.keysServed.Add(1)
		resp.Configs[key] = st
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// isPending reports whether project idx is still answered as pending.
func (s *Server) isPending(idx int, now time.Time) bool {
	if s.cfg.PendingFor <= 0 {
		return false
	}
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	first, ok := s.pendingSince[idx]
	if !ok {
		s.pendingSince[idx] = now
		return true
	}
	return now.Sub(first) < s.cfg.PendingFor
}

// blastKindCategories are the data categories of blast's kind names, for a
// hint when a quota names a kind.
var blastKindCategories = map[string]string{"errors": "error", "transactions": "transaction", "sessions": "session",
	"logs": "log_item", "checkins": "monitor", "check_in": "monitor", "check-in": "monitor"}

// checkQuota checks that a quota is a JSON object whose categories, if
// given, are data categories Relay knows: a quota naming any other matches
// nothing in Relay.
func checkQuota(q json.RawMessage) error {
	var obj struct {
		Categories []string `json:"categories"`
	}
	if err := json.Unmarshal(q, &obj); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	for _, c := range obj.Categories {
		if slices.Contains(categoryNames[:], c) {
			continue
		}
		hint := ""
		if cat, ok := blastKindCategories[c]; ok {
			hint = fmt.Sprintf(" (blast's kind %q is the data category %q)", c, cat)
		}
		return fmt.Errorf("unknown data category %q%s; Relay's categories: %s", c, hint, strings.Join(categoryNames[:], ", "))
	}
	return nil
}

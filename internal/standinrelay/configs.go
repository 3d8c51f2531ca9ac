package standinrelay

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
)

const configsPath = "/api/0/relays/projectconfigs/?version=3"

// batchSize is Relay's cache.batch_size: keys per project-config request.
const batchSize = 500

// projectStatus is what the stand-in knows about a project key.
type projectStatus int

const (
	projectLoading  projectStatus = iota // asked for, not answered yet
	projectEnabled                       // a config with disabled: false
	projectDisabled                      // disabled: true, null or missing
)

type project struct {
	status projectStatus
	id     int64 // projectId of an enabled config
}

// projectCache holds the configs fetched so far. A config is fetched once
// and kept (Relay refetches after cache.project_expiry, 300 s).
type projectCache struct {
	mu    sync.Mutex
	byKey map[string]project
	queue []string // keys to fetch
	wake  chan struct{}
}

func newProjectCache() *projectCache {
	return &projectCache{byKey: map[string]project{}, wake: make(chan struct{}, 1)}
}

// lookup returns what is known about key and queues a fetch for a key not
// seen before.
func (c *projectCache) lookup(key string) project {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.byKey[key]
	if !ok {
		c.byKey[key] = p
		c.queueLocked(key)
	}
	return p
}

func (c *projectCache) queueLocked(keys ...string) {
	c.queue = append(c.queue, keys...)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// get returns what is known about key without queueing anything.
func (c *projectCache) get(key string) project {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[key]
}

func (c *projectCache) set(key string, p project) {
	c.mu.Lock()
	c.byKey[key] = p
	c.mu.Unlock()
}

// runProjects fetches queued keys: those asked for within
// cache.batch_interval go in one request (at most batchSize keys each).
func (r *Relay) runProjects(ctx context.Context) {
	c := r.projects
	bo := newBackoff(r.cfg.MaxRetryInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		if !sleep(ctx, r.cfg.BatchInterval) {
			return
		}
		c.mu.Lock()
		keys := c.queue
		c.queue = nil
		c.mu.Unlock()
		var failed []string
		for len(keys) > 0 {
			n := min(len(keys), batchSize)
			pending, err := r.fetchProjects(ctx, keys[:n])
			if err != nil {
				failed = append(failed, keys[:n]...)
			}
			c.mu.Lock()
			c.queueLocked(pending...) // asked for again in the next batch
			c.mu.Unlock()
			keys = keys[n:]
		}
		if len(failed) == 0 {
			bo = newBackoff(r.cfg.MaxRetryInterval)
			continue
		}
		if !sleep(ctx, bo.next()) {
			return
		}
		c.mu.Lock()
		c.queueLocked(failed...)
		c.mu.Unlock()
	}
}

// fetchProjects asks for keys and stores the answers. It returns the keys
// the upstream answered as pending, or the request's error.
func (r *Relay) fetchProjects(ctx context.Context, keys []string) (pending []string, err error) {
	body, _ := json.Marshal(map[string]any{"publicKeys": keys, "fullConfig": false})
	var resp struct {
		Configs map[string]json.RawMessage `json:"configs"`
		Pending []string                   `json:"pending"`
	}
	if err := r.query(ctx, configsPath, body, &resp); err != nil {
		if ctx.Err() == nil {
			r.log.Printf("project configs for %d keys: %v", len(keys), err)
		}
		return nil, err
	}
	for _, k := range keys {
		if slices.Contains(resp.Pending, k) {
			pending = append(pending, k)
			continue
		}
		var st struct {
			Disabled  bool  `json:"disabled"`
			ProjectID int64 `json:"projectId"`
		}
		p := project{status: projectDisabled}
		if raw, ok := resp.Configs[k]; ok && json.Unmarshal(raw, &st) == nil && string(raw) != "null" && !st.Disabled {
			p = project{status: projectEnabled, id: st.ProjectID}
		}
		r.projects.set(k, p)
		if p.status == projectEnabled {
			if r.globalReady.Load() {
				r.buffer.release(k)
			}
		} else if n := r.buffer.drop(k); n > 0 {
			r.log.Printf("project key %s disabled: dropped %d envelopes", k, n)
		}
	}
	return pending, nil
}

// runGlobalConfig asks for the global config every
// cache.global_config_fetch_interval. Nothing is processed before the
// first ready one arrived.
func (r *Relay) runGlobalConfig(ctx context.Context) {
	for {
		var resp struct {
			Global       json.RawMessage `json:"global"`
			GlobalStatus string          `json:"globalStatus"`
		}
		err := r.query(ctx, configsPath, []byte(`{"global":true,"publicKeys":[]}`), &resp)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Printf("global config: %v", err)
		case len(resp.Global) == 0 || string(resp.Global) == "null" || resp.GlobalStatus == "pending":
			r.log.Printf("global config from upstream is not yet ready")
		case r.globalReady.CompareAndSwap(false, true):
			r.log.Printf("received global config from upstream; processing starts")
			r.buffer.releaseWhere(func(key string) bool { return r.projects.get(key).status == projectEnabled })
		}
		if !sleep(ctx, r.cfg.GlobalFetchInterval) {
			return
		}
	}
}

package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dpfl/dpfl/api/types"
)

// LogKey returns the server's transparency log verifier key (GET
// /v1/log/key). Check it against the key the operator published before
// pinning it: a key fetched from the server vouches only for itself.
func (c *Client) LogKey(ctx context.Context) (types.LogKeyResponse, error) {
	var out types.LogKeyResponse
	err := c.do(ctx, http.MethodGet, "/v1/log/key", nil, &out)
	return out, err
}

// LogCheckpoint returns the log's latest signed checkpoint (GET
// /v1/log/checkpoint).
func (c *Client) LogCheckpoint(ctx context.Context) (types.CheckpointResponse, error) {
	var out types.CheckpointResponse
	err := c.do(ctx, http.MethodGet, "/v1/log/checkpoint", nil, &out)
	return out, err
}

// LogConsistency returns the latest signed checkpoint and the proof that
// the log of old leaves is a prefix of it (GET /v1/log/consistency).
func (c *Client) LogConsistency(ctx context.Context, old int64) (types.CheckpointResponse, error) {
	var out types.CheckpointResponse
	err := c.do(ctx, http.MethodGet, "/v1/log/consistency?old="+strconv.FormatInt(old, 10), nil, &out)
	return out, err
}

// AuditBundle returns job id's audit bundle (GET
// /v1/log/jobs/{id}/bundle) as the server sent it: an audit.Bundle in
// JSON, which package audit decodes and verifies (the client stays free
// of the transparency log's code). With since > 0 the bundle's since
// holds the proof that the log of since leaves is a prefix of the
// bundle's; the caller puts the earlier checkpoint it kept into
// Since.Checkpoint.
func (c *Client) AuditBundle(ctx context.Context, id string, since int64) (json.RawMessage, error) {
	var b json.RawMessage
	path := "/v1/log/jobs/" + url.PathEscape(id) + "/bundle"
	if since > 0 {
		path += "?since=" + strconv.FormatInt(since, 10)
	}
	err := c.do(ctx, http.MethodGet, path, nil, &b)
	return b, err
}

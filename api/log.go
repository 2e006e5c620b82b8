package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/job"
)

// The transparency log's routes (package audit; docs/auditing.md). They
// only read, so an auditor's token opens them:
//
//	GET /v1/log/key                      the server's note verifier key
//	GET /v1/log/checkpoint               the latest signed checkpoint
//	GET /v1/log/consistency?old=N        proof that the log of N leaves is a prefix of the latest
//	GET /v1/log/leaves?start=A&end=B     leaves A … B−1 (at most MaxLogLeaves)
//	GET /v1/log/jobs/:id/bundle[?since=N] a job's audit bundle (audit.Bundle)

// MaxLogLeaves bounds the leaves one GET /v1/log/leaves returns.
const MaxLogLeaves = 1000

// registerLog adds the log's routes to the API token's group.
func (h *handlers) registerLog(g *echo.Group) {
	g.GET("/log/key", h.logKey)
	g.GET("/log/checkpoint", h.logCheckpoint)
	g.GET("/log/consistency", h.logConsistency)
	g.GET("/log/leaves", h.logLeaves)
	g.GET("/log/jobs/:id/bundle", h.logBundle)
}

// queryInt reads the non-negative integer query parameter name (def when
// absent); anything else is a *job.ValidationError.
func queryInt(c echo.Context, name string, def int64) (int64, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, job.NewValidationError(name, types.RuleRange, fmt.Sprintf("must be a whole number ≥ 0, got %q", s))
	}
	return n, nil
}

func (h *handlers) logKey(c echo.Context) error {
	if _, err := h.m.LogHead(); err != nil { // refuses a server that does not sign
		return err
	}
	key := h.m.LogKey()
	v, err := note.NewVerifier(key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, types.LogKeyResponse{PublicKey: key, Origin: v.Name()})
}

func (h *handlers) logCheckpoint(c echo.Context) error {
	head, err := h.m.LogHead()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, types.CheckpointResponse{Size: head.Size, Root: head.Root[:], Checkpoint: head.Checkpoint})
}

func (h *handlers) logConsistency(c echo.Context) error {
	old, err := queryInt(c, "old", -1)
	if err != nil {
		return err
	}
	if old < 0 {
		return job.NewValidationError("old", types.RuleRequired, "required: the size of the earlier checkpoint")
	}
	head, proof, err := h.m.LogConsistency(old)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, types.CheckpointResponse{Size: head.Size, Root: head.Root[:], Checkpoint: head.Checkpoint, Old: old, Proof: hashes(proof)})
}

func (h *handlers) logLeaves(c echo.Context) error {
	start, err := queryInt(c, "start", 0)
	if err != nil {
		return err
	}
	end, err := queryInt(c, "end", -1)
	if err != nil {
		return err
	}
	if end < 0 {
		head, err := h.m.LogHead()
		if err != nil {
			return err
		}
		end = head.Size
	}
	if end > start+MaxLogLeaves {
		end = start + MaxLogLeaves
	}
	leaves, err := h.m.LogLeaves(start, end)
	if err != nil {
		return err
	}
	out := types.LeavesResponse{Start: start, Leaves: make([]string, len(leaves))}
	for i, l := range leaves {
		out.Leaves[i] = string(l)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handlers) logBundle(c echo.Context) error {
	since, err := queryInt(c, "since", 0)
	if err != nil {
		return err
	}
	b, err := h.m.AuditBundle(c.Param("id"), since)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

// hashes is a tlog proof as the wire's byte strings (base64 in JSON, as
// tlog.Hash marshals itself).
func hashes(p tlog.TreeProof) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

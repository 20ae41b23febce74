package pin

import (
	"context"
	"errors"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// PlanSchema is the schema of a shard plan.
const PlanSchema = "pinfs.plan.v1"

var errPlanTODO = errors.New("pin: sharded pins are not implemented yet")

// Plan is a listing split into shards (stub: see /tmp/contracts12.md).
type Plan struct {
	Schema string `json:"schema"`
}

func (p *Pinner) Plan(ctx context.Context, bucket, prefix string, n int) ([]byte, verify.Digest, error) {
	return nil, "", errPlanTODO
}
func ParsePlan(b []byte) (*Plan, error) { return nil, errPlanTODO }
func LoadPlan(ctx context.Context, st store.Blobs, arg string) (*Plan, verify.Digest, error) {
	return nil, "", errPlanTODO
}

// Options returns base with the manifest fields of the plan filled in.
func (pl *Plan) Options(base Options) (Options, error) { return base, errPlanTODO }

// Len is the number of shards.
func (pl *Plan) Len() int { return 0 }

// Summary is "O objects, B bytes in N shards (largest X, smallest Y bytes)".
func (pl *Plan) Summary() string { return "" }
func (p *Pinner) Shard(ctx context.Context, pl *Plan, d verify.Digest, i int) error {
	return errPlanTODO
}
func (p *Pinner) Merge(ctx context.Context, pl *Plan, d verify.Digest) (verify.Digest, error) {
	return "", errPlanTODO
}

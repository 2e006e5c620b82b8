package job

import (
	"errors"
	"fmt"

	"github.com/dpfl/dpfl/api/types"
)

// Validation: one validator per sub-spec, each adding the rules it finds
// broken to a list in its fields' order, the validators always called in
// the order of validateSpec, so that a spec with several broken rules
// gets all of them, in the same order every time. Numbers
// are checked against limits (limits.go), the one set of bounds.

// fieldErrs collects broken rules in the order the validators find them.
type fieldErrs []types.FieldError

// add appends fe when it is a broken rule (non-nil).
func (e *fieldErrs) add(fe *types.FieldError) {
	if fe != nil {
		*e = append(*e, *fe)
	}
}

// addf appends a broken rule of kind rule on field.
func (e *fieldErrs) addf(field, rule, format string, a ...any) {
	*e = append(*e, types.FieldError{Field: field, Rule: rule, Message: fmt.Sprintf(format, a...)})
}

// rng checks x against field's bound (limits), under the limits entry
// key when given.
func (e *fieldErrs) rng(field string, x float64, key ...string) {
	e.add(checkRange(field, x, key...))
}

// err appends the rules of a *ValidationError (other errors cannot come
// from a check and are not expected here).
func (e *fieldErrs) err(err error) {
	var ve *ValidationError
	if errors.As(err, &ve) {
		*e = append(*e, ve.Errors()...)
	}
}

// Validate checks every field of s and returns every broken rule, in a
// fixed order (sub-spec by sub-spec, as validateSpec lists them), as a
// *ValidationError; nil when s is valid. trainSize is the number of
// training examples of the dataset (users cannot outnumber examples).
// Numbers must lie within the bounds of limits.go (the message names the
// bound), so that none overflows, underflows or loses its meaning in the
// training, the noise or the accounting.
func Validate(s types.Spec, trainSize int) error {
	return asError(validateSpec(s, trainSize))
}

// validateSpec is Validate's list of broken rules. The order of the
// validators is part of the API (the first rule is the one a 400 names):
// the data, the population and its sampling, then training, then
// privacy, then the systems settings.
func validateSpec(s types.Spec, trainSize int) []types.FieldError {
	var e fieldErrs
	trainSize = validateDataset(&e, s, trainSize)
	validateModel(&e, s)
	validatePopulation(&e, s, trainSize)
	validateSampling(&e, s)
	e.rng("rounds", float64(s.Rounds))
	validateClient(&e, s.Client)
	validateServer(&e, s.Server)
	validateDP(&e, s)
	validateAuditSpec(&e, s)
	e.rng("eval_every", float64(s.EvalEvery))
	validateAlgorithm(&e, s)
	validateParticipation(&e, s)
	validateRoundTime(&e, s.RoundTime)
	validateDevices(&e, s)
	validateSecAgg(&e, s)
	return e
}

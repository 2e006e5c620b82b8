package main

import "errors"

// fedProx reproduces Li et al. 2020's Figure 1 setting; it needs the
// Synthetic(α, β) generator.
func fedProx(e *env) error {
	return errors.New("not yet available: needs the Synthetic(α, β) generator")
}

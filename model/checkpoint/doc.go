// Package checkpoint writes random-weight checkpoints in the real Hugging
// Face layout (config.json, generation_config.json, model.safetensors), for
// benchmarks, tests and the built-in demo model.
//
// A checkpoint written here goes through exactly the loader a downloaded one
// does: the tensor names and shapes come from the same rules the model
// families read, so a preset with SmolLM2-135M's shapes measures what the real
// model would cost. Weights are drawn from N(0, std) with a seeded PCG
// generator, so the same config and seed always give the same bytes.
package checkpoint

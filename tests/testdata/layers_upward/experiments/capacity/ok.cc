// Fixture of layer_arrows_upward_test: a downward include (allowed).
#include "experiments/runner/config.h"

// Fixture of layer_arrows_upward_test: an upward include.
#include "experiments/cli/cli.h"
#include "sim/base/hash.h"

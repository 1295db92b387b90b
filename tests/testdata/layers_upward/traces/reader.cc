// Fixture of layer_arrows_upward_test: traces may not include hwmodels.
#include "hwmodels/catalog.h"

#include "fair_util.h"

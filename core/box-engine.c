/* box-engine.c: to be written */
#include "config.h"

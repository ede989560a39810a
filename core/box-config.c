/* box-config.c: to be written */
#include "config.h"

/* box-plugin.c: to be written */
#include "config.h"

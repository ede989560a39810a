/* box-names.c: to be written */
#include "config.h"

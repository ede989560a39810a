/* box-http-sandboxes.c: to be written */
#include "config.h"

/* box-http-util.c: to be written */
#include "config.h"

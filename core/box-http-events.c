/* box-http-events.c: to be written */
#include "config.h"

/* box-http-server.c: to be written */
#include "config.h"

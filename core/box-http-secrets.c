/* box-http-secrets.c: to be written */
#include "config.h"

/* box-secret-key.c: to be written */
#include "config.h"

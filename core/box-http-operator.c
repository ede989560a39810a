/* box-http-operator.c: to be written */
#include "config.h"

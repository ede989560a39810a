/* box-validate.c: to be written */
#include "config.h"

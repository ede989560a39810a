/* box-plugin-loader.c: to be written */
#include "config.h"

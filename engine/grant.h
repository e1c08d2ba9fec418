/* Transitional: the grant type lives with the mediator until engine/grant.c lands. */
#ifndef A3S_GRANT_H
#define A3S_GRANT_H
#include "mediator.h"
#endif

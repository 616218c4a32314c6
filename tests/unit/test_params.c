#include <errno.h>
#include <stdlib.h>

#include "unit.h"
#include "params.h"

START_TEST(test_params_defaults_are_valid)
{
	struct im_params p;
	char why[128] = "";

	im_params_init(&p);
	ck_assert_msg(im_params_check(&p, why, sizeof(why)) == 0,
		      "defaults rejected: %s", why);
	ck_assert_uint_eq(p.min_word_len, 4);
	ck_assert_uint_eq(p.max_digits, 1);
	ck_assert_uint_eq(p.min_unique, 5);
}
END_TEST

START_TEST(test_params_set_parses_values)
{
	struct im_params p;

	im_params_init(&p);
	ck_assert_int_eq(im_params_set(&p, "k", "5"), 0);
	ck_assert_uint_eq(p.k, 5);
	ck_assert_int_eq(im_params_set(&p, "nidf", "0.1:0.9"), 0);
	ck_assert_double_eq_tol(p.nidf_lo, 0.1, 1e-12);
	ck_assert_double_eq_tol(p.nidf_hi, 0.9, 1e-12);
	ck_assert_int_eq(im_params_set(&p, "max_size", "2M"), 0);
	ck_assert_uint_eq(p.max_size, 2u << 20);
	ck_assert_int_eq(im_params_set(&p, "seed", "0x10"), 0);
	ck_assert_uint_eq(p.seed, 16);
}
END_TEST

START_TEST(test_params_set_refuses_bad_values)
{
	struct im_params p;

	im_params_init(&p);
	unsigned k = p.k;

	ck_assert_int_eq(im_params_set(&p, "k", "-1"), -EINVAL);
	ck_assert_int_eq(im_params_set(&p, "k", "ten"), -EINVAL);
	ck_assert_int_eq(im_params_set(&p, "keep", "0.5x"), -EINVAL);
	ck_assert_int_eq(im_params_set(&p, "nidf", "0.5"), -EINVAL);
	ck_assert_int_eq(im_params_set(&p, "nidf", "a:b"), -EINVAL);
	ck_assert_int_eq(im_params_set(&p, "max_size", "12Q"), -EINVAL);
	ck_assert_int_eq(im_params_set(&p, "colour", "blue"), -ENOENT);
	/* A refused value leaves the old one in place. */
	ck_assert_uint_eq(p.k, k);
}
END_TEST

START_TEST(test_params_check_catches_inconsistency)
{
	struct im_params p;
	char why[128];

	im_params_init(&p);
	p.k = IM_MAX_LEXICONS + 1;
	ck_assert_int_eq(im_params_check(&p, why, sizeof(why)), -EINVAL);
	im_params_init(&p);
	p.nidf_lo = 0.9;
	p.nidf_hi = 0.1;
	ck_assert_int_eq(im_params_check(&p, why, sizeof(why)), -EINVAL);
	ck_assert_msg(why[0] != '\0', "no reason given");
	im_params_init(&p);
	p.keep = 0;
	ck_assert_int_eq(im_params_check(&p, NULL, 0), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("params");
	TCase *tc = tcase_create("params");

	tcase_add_test(tc, test_params_defaults_are_valid);
	tcase_add_test(tc, test_params_set_parses_values);
	tcase_add_test(tc, test_params_set_refuses_bad_values);
	tcase_add_test(tc, test_params_check_catches_inconsistency);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

import { ValidationError, type FieldError } from '../errors.js';
import { checkPassword } from '../orgs/orgs.js';

/**
 * A password someone chooses for themselves (accepting an invitation, a reset, a change): 8 to
 * 1024 characters, and not their email address.
 */
export function checkNewPassword(password: string, email: string): void {
  const errors: FieldError[] = [];
  checkPassword(password, errors);
  if (errors.length === 0 && password.trim().toLowerCase() === email.trim().toLowerCase()) {
    errors.push({ field: 'password', message: 'must not be your email address' });
  }
  if (errors.length > 0) throw new ValidationError(errors);
}

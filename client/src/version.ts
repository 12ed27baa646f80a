/** This package's version (a test keeps it equal to package.json's), sent in the User-Agent. */
export const VERSION = '0.1.0';

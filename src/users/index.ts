/** Dashboard users (name, role, password) and the routes of users and sessions. */
export { UserStore } from './store.js';
export { sessionRoutes, userRoutes } from './routes.js';

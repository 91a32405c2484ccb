//! The checker's tasks follow the view: started per checked endpoint,
//! cancelled when the endpoint or its check goes away.
